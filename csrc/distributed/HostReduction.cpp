#include "distributed/HostReduction.h"
#include "aten/native/NeuronDtypeRules.h"

namespace neuron::distributed {

HostReduction HostReduction::plan(const c10d::ReduceOp& op, at::ScalarType dtype, int group_size,
                                  const char* collective) {
  HostReduction r;
  r.host_op = op;
  bool integral = at::isIntegralType(dtype, /*includeBool=*/true);
  if (op.op_ == c10d::ReduceOp::PREMUL_SUM) {
    auto* supplement = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(supplement != nullptr, "neuron backend: ", collective, ": PREMUL_SUM without a factor");
    TORCH_CHECK(!integral, "neuron backend: ", collective, ": PREMUL_SUM needs a floating-point tensor, got ", dtype);
    // A tensor factor may live on the device; .item() reads it through the device's own copy kernel.
    r.premul = supplement->tensor_factor.defined() ? supplement->tensor_factor.item<double>()
                                                   : supplement->double_factor;
    r.host_op = c10d::ReduceOp(c10d::ReduceOp::SUM);
  } else if (op.op_ == c10d::ReduceOp::AVG && integral) {
    TORCH_CHECK(dtype != at::kBool, "neuron backend: ", collective, ": AVG is not defined for bool tensors");
    r.host_op = c10d::ReduceOp(c10d::ReduceOp::SUM);
    r.integer_divisor = group_size;
  }
  if (integral && dtype != at::kBool && dtype_rules::result_has_rule(dtype) &&
      (op.op_ == c10d::ReduceOp::SUM || op.op_ == c10d::ReduceOp::AVG))
    r.checked_integer_sum = collective;
  return r;
}

void HostReduction::scale_in_place(std::vector<at::Tensor>& host_tensors) const {
  if (!premul) return;
  for (auto& t : host_tensors) t.mul_(*premul);
}

std::vector<at::Tensor> HostReduction::scaled_copies(const std::vector<at::Tensor>& host_inputs) const {
  if (!premul) return host_inputs;
  std::vector<at::Tensor> out;
  out.reserve(host_inputs.size());
  for (const auto& t : host_inputs) out.push_back(t.mul(*premul));
  return out;
}

void HostReduction::finish(const std::vector<at::Tensor>& host_outputs) const {
  if (checked_integer_sum)
    for (const auto& t : host_outputs) dtype_rules::apply_to_result(checked_integer_sum, t, true);
  if (integer_divisor == 0) return;
  for (const auto& t : host_outputs) {
    auto view = t;  // div_ needs a non-const handle; it writes the caller's memory either way
    view.div_(integer_divisor, "trunc");
  }
}

} // namespace neuron::distributed
