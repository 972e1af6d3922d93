// Frequent ops that run their CPU kernel on host aliases without the boxed fallback: sum and mean over
// dimensions, cat (24 calls in a training step of a small Llama, where each cost ~3-4.5 us more than on
// CPU through the fallback's generic work: the argument stack, the op lookup, two scans of every argument).
//
// The CPU kernel reads the inputs through their host aliases and allocates its result on the host, which
// then becomes device memory through the host bridge (adopted without a copy where the runtime can): the
// same kernel on the same bytes as a CPU tensor's call, so results are bit-equal. Only the common case
// takes this path: every tensor a neuron tensor of one core, in one floating dtype without a Neuron dtype
// rule (float32, bfloat16, float16), and no dtype conversion asked; the rest (mixed devices or dtypes,
// float64, integers, complex) takes the boxed fallback, whose checks, rules and messages apply.
#include "aten/native/HostKernels.h"
#include "aten/native/Native.h"

#include <ATen/ops/cat_cpu_dispatch.h>
#include <ATen/ops/mean_cpu_dispatch.h>
#include <ATen/ops/sum_cpu_dispatch.h>

namespace neuron::native {
namespace {

using host_kernels::boxed_fallback;
using host_kernels::on_host_alias_path;
using host_kernels::record_signature;

// A reduction of `self` to its own dtype.
bool reduces_on_this_path(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return on_host_alias_path({&self}) && (!dtype || *dtype == self.scalar_type());
}

// cat's signature covers every tensor of its list, as the fallback's does.
op_signatures::Op& cat_signature_op() {
  static auto* op = new op_signatures::Op("aten::cat");
  return *op;
}

} // namespace

at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype) {
  if (!reduces_on_this_path(self, dtype))
    return boxed_fallback<ATEN_OP2(sum, dim_IntList)>(self, dim, keepdim, dtype);
  record_signature<ATEN_OP2(sum, dim_IntList)>(self);
  return from_host(at::cpu::sum(host_alias(self), dim, keepdim, dtype), self.device().index());
}

at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype) {
  if (!reduces_on_this_path(self, dtype))
    return boxed_fallback<ATEN_OP2(mean, dim)>(self, dim, keepdim, dtype);
  record_signature<ATEN_OP2(mean, dim)>(self);
  return from_host(at::cpu::mean(host_alias(self), dim, keepdim, dtype), self.device().index());
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  if (!on_host_alias_path(tensors)) return boxed_fallback<ATEN_OP(cat)>(tensors, dim);
  op_signatures::Hasher signature(cat_signature_op().name_hash);
  c10::SmallVector<at::Tensor, 8> hosts;
  for (const at::Tensor& t : tensors) {
    signature.add(t);
    hosts.push_back(host_alias(t));
  }
  op_signatures::record(cat_signature_op(), signature);
  return from_host(at::cpu::cat(at::ITensorListRef(hosts.data(), hosts.size()), dim), tensors.front().device().index());
}

} // namespace neuron::native
