// Registration of the hot elementwise ops that run the host's compute kernels
// directly on device memory (aten/native/HostKernels.h explains how).
#include "aten/native/HostKernels.h"

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
  NEURON_UNARY(cos)
  NEURON_UNARY(sin)
#undef NEURON_UNARY
  m.impl("silu_backward",
         TORCH_FN((functional<native::structured_silu_backward_out, ATEN_OP(silu_backward), Tensor, Tensor>)));
}

} // namespace
} // namespace neuron::host_kernels
