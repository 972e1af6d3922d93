// rms_norm as TorchNeuron runs it, and the backward of its fused form.
//
//  * rms_norm: TorchNeuron registers it as a function that always takes the fused form, _fused_rms_norm:
//    a float16/bfloat16 input with a weight of another dtype is computed in float32 (input and weight
//    cast) and the result cast back to the input's dtype. PyTorch's composite instead leaves the fused
//    form for such a pair (a "Mismatch dtype" warning) and decomposes. Op tracking records rms_norm and
//    the ops it calls (_fused_rms_norm), as there; autograd differentiates through _fused_rms_norm.
//  * _fused_rms_norm_backward: what _fused_rms_norm's autograd formula calls; CUDA and MPS have kernels,
//    the CPU none. Computed from ATen ops on the device tensors, in float32 for reduced-precision inputs,
//    as CUDA does.
#include "aten/native/Native.h"

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <c10/util/accumulate.h>

#include <vector>

namespace neuron::native {

at::Tensor rms_norm(const at::Tensor& input, c10::SymIntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                    std::optional<double> eps) {
  at::Tensor x = input;
  std::optional<at::Tensor> w = weight;
  const bool reduced = input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16;
  if (weight.has_value() && weight->defined() && weight->scalar_type() != input.scalar_type() && reduced) {
    x = input.to(at::kFloat);
    w = weight->to(at::kFloat);
  }
  at::Tensor out = std::get<0>(at::_fused_rms_norm(x, C10_AS_INTARRAYREF_SLOW(normalized_shape), w, eps));
  return out.scalar_type() == input.scalar_type() ? out : out.to(input.scalar_type());
}

std::tuple<at::Tensor, at::Tensor> fused_rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                           at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                           const std::optional<at::Tensor>& weight,
                                                           std::array<bool, 2> mask) {
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(axis >= 0 && input.sizes().slice(axis).equals(normalized_shape), "_fused_rms_norm_backward: input of shape ",
              input.sizes(), " does not end in normalized_shape ", normalized_shape);
  const bool has_weight = weight.has_value() && weight->defined();
  const at::ScalarType compute = at::toOpMathType(input.scalar_type());
  const at::Tensor x = input.to(compute), dy = grad_out.to(compute);
  at::Tensor r = rstd.to(compute);  // the rows' 1/rms, the normalized dims kept as size 1
  while (r.dim() < x.dim()) r = r.unsqueeze(-1);
  const at::Tensor x_hat = x * r;
  std::vector<int64_t> inner, outer;
  for (int64_t d = 0; d < input.dim(); ++d) (d < axis ? outer : inner).push_back(d);
  at::Tensor grad_input, grad_weight;
  if (mask[0]) {
    const at::Tensor g = has_weight ? dy * weight->to(compute) : dy;
    const double n = static_cast<double>(c10::multiply_integers(normalized_shape));
    grad_input = ((g - x_hat * (x_hat * g).sum(inner, /*keepdim=*/true).div(n)) * r).to(input.scalar_type());
  }
  if (mask[1] && has_weight) {
    const at::Tensor full = dy * x_hat;
    grad_weight = (outer.empty() ? full : full.sum(outer)).to(weight->scalar_type());
  }
  return {grad_input, grad_weight};
}

} // namespace neuron::native
