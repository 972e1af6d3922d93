// torch.autocast("neuron"): the same cast policies as CUDA (matmuls and
// convolutions in the lower precision, reductions and losses in fp32), with
// bfloat16 as the default dtype (set from Python). Every other op falls through.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace {

using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define NEURON_LOW(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NEURON_FP32_OPT(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
#define NEURON_DIFF(REDISPATCH, NAME, SIG, RSIG, POLICY) \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(REDISPATCH, NAME, SIG, RSIG, POLICY)
  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOW)
  AT_FORALL_FP32(NEURON_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_OPT)
  AT_FORALL_PROMOTE(NEURON_PROMOTE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(NEURON_DIFF)
}

} // namespace
