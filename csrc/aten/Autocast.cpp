// torch.autocast("neuron"): as TorchNeuron's (csrc/amp/autocast_mode.cpp; AWS: "automatic datatype
// conversion following PyTorch CUDA conventions"): CUDA's cast policies (matmuls and convolutions in
// the lower precision, reductions and losses in fp32), CUDA's ban of binary_cross_entropy, and
// PyTorch's default autocast dtype for the device (float16, as on CUDA). Every other op falls through.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace {

// As on CUDA: autocast refuses binary_cross_entropy (a sigmoid followed by it underflows in 16 bits).
at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                       int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

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
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}

} // namespace
