// Registration of the hot elementwise ops that run the host's compute kernels
// directly on device memory (aten/native/HostKernels.h explains how), and the
// compute stubs the device shares with the host.
#include "aten/native/HostKernels.h"

#if defined(__x86_64__) || defined(_M_X64)
namespace neuron::host_kernels {
namespace {

using at::Scalar;
using at::Tensor;
namespace native = at::native;

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Binary ops, with a Python number or a tensor on the other side.
  m.impl("add.Tensor", TORCH_FN((binary<native::structured_ufunc_add_CPU, ATEN_OP2(add, Tensor), Scalar>)));
  m.impl("add_.Tensor", TORCH_FN((binary_<native::structured_ufunc_add_CPU, ATEN_OP2(add_, Tensor), Scalar>)));
  m.impl("sub.Tensor", TORCH_FN((binary<native::structured_sub_out, ATEN_OP2(sub, Tensor), Scalar>)));
  m.impl("sub_.Tensor", TORCH_FN((binary_<native::structured_sub_out, ATEN_OP2(sub_, Tensor), Scalar>)));
  m.impl("mul.Tensor", TORCH_FN((binary<native::structured_mul_out, ATEN_OP2(mul, Tensor)>)));
  m.impl("mul_.Tensor", TORCH_FN((binary_<native::structured_mul_out, ATEN_OP2(mul_, Tensor)>)));
  m.impl("div.Tensor", TORCH_FN((binary<native::structured_div_out, ATEN_OP2(div, Tensor)>)));
  m.impl("div_.Tensor", TORCH_FN((binary_<native::structured_div_out, ATEN_OP2(div_, Tensor)>)));
  m.impl("maximum", TORCH_FN((functional<native::structured_maximum_out, ATEN_OP(maximum), Tensor, Tensor>)));
  m.impl("minimum", TORCH_FN((functional<native::structured_minimum_out, ATEN_OP(minimum), Tensor, Tensor>)));
  m.impl("pow.Tensor_Scalar",
         TORCH_FN((functional<native::structured_pow_Tensor_Scalar_out, ATEN_OP2(pow, Tensor_Scalar), Tensor, Scalar>)));
  m.impl("pow_.Scalar", TORCH_FN((inplace<native::structured_pow_Tensor_Scalar_out, ATEN_OP2(pow_, Scalar), Scalar>)));

  // Unary ops.
#define NEURON_UNARY(name)                                                                          \
  m.impl(#name, TORCH_FN((functional<native::structured_##name##_out, ATEN_OP(name), Tensor>)));   \
  m.impl(#name "_", TORCH_FN((inplace<native::structured_##name##_out, ATEN_OP(name##_)>)));
  NEURON_UNARY(neg)
  NEURON_UNARY(exp)
  NEURON_UNARY(log)
  NEURON_UNARY(sqrt)
  NEURON_UNARY(rsqrt)
  NEURON_UNARY(reciprocal)
  NEURON_UNARY(sigmoid)
  NEURON_UNARY(tanh)
  NEURON_UNARY(silu)
#undef NEURON_UNARY
}

// The compute stubs the kernels above call with device type PrivateUse1.
const bool g_stubs_shared = [] {
  share_with_device(native::add_stub);
  share_with_device(native::mul_stub);
  share_with_device(native::div_true_stub);
  share_with_device(native::maximum_stub);
  share_with_device(native::minimum_stub);
  share_with_device(native::pow_tensor_scalar_stub);
  share_with_device(native::neg_stub);
  share_with_device(native::exp_stub);
  share_with_device(native::log_stub);
  share_with_device(native::sqrt_stub);
  share_with_device(native::rsqrt_stub);
  share_with_device(native::reciprocal_stub);
  share_with_device(native::sigmoid_stub);
  share_with_device(native::tanh_stub);
  share_with_device(native::silu_stub);
  // scaled_dot_product_attention asks this stub which kernel to use; sharing the host's
  // choice gives neuron the CPU's fused flash-attention kernel (through the fallback)
  // instead of the unfused math path, which is slower and rounds differently from CPU.
  share_with_device(native::_fused_sdp_choice_stub);
  return true;
}();

} // namespace
} // namespace neuron::host_kernels
#endif
