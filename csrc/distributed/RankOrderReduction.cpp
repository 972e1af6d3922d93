#include "distributed/RankOrderReduction.h"

namespace neuron::distributed {
namespace {

using Op = c10d::ReduceOp::RedOpType;

at::Tensor over(const void* p, int64_t count, at::ScalarType dtype) {
  return at::from_blob(const_cast<void*>(p), {count}, at::TensorOptions().dtype(dtype));
}

void step(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, Op op) {
  switch (op) {
    case Op::SUM:
    case Op::AVG: at::add_out(out, a, b); break;
    case Op::PRODUCT: at::mul_out(out, a, b); break;
    case Op::MIN: at::minimum_out(out, a, b); break;
    case Op::MAX: at::maximum_out(out, a, b); break;
    case Op::BAND: at::bitwise_and_out(out, a, b); break;
    case Op::BOR: at::bitwise_or_out(out, a, b); break;
    case Op::BXOR: at::bitwise_xor_out(out, a, b); break;
    default: TORCH_INTERNAL_ASSERT(false, "neuron backend: no rank-order reduction for op ", static_cast<int>(op));
  }
}

} // namespace

bool reducible_in_rank_order(at::ScalarType dtype, Op op) {
  const bool floating = at::isFloatingType(dtype) && !at::isComplexType(dtype);
  const bool integral = at::isIntegralType(dtype, /*includeBool=*/false);
  if (!floating && !integral) return false;
  switch (op) {
    case Op::SUM:
    case Op::PRODUCT:
    case Op::MIN:
    case Op::MAX: return true;
    case Op::AVG: return floating;
    case Op::BAND:
    case Op::BOR:
    case Op::BXOR: return integral;
    default: return false;
  }
}

void reduce_in_rank_order(void* dst, const void* const* srcs, int n, int64_t count, at::ScalarType dtype, Op op) {
  if (count == 0) return;
  at::NoGradGuard no_grad;
  auto result = over(dst, count, dtype);
  // The first step writes dst: if a later source is dst (in place), accumulate elsewhere first.
  bool later_source = false;
  for (int q = 2; q < n; ++q) later_source = later_source || srcs[q] == dst;
  auto out = later_source ? at::empty({count}, result.options()) : result;
  if (n == 1) {
    if (dst != srcs[0]) out.copy_(over(srcs[0], count, dtype));
  } else {
    step(out, over(srcs[0], count, dtype), over(srcs[1], count, dtype), op);
    for (int q = 2; q < n; ++q) step(out, out, over(srcs[q], count, dtype), op);
  }
  if (op == Op::AVG) out.div_(n);
  if (later_source) result.copy_(out);
}

} // namespace neuron::distributed
