// Convolutions reach a backend other than CPU/CUDA as convolution_overrideable;
// run the host convolution (which picks its own algorithm) on aliases.
#include "aten/native/Native.h"
#include "core/HostBridge.h"

#include <ATen/ATen.h>

#include <vector>

namespace neuron::native {

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups) {
  std::optional<at::Tensor> hbias;
  if (bias && bias->defined()) hbias = as_host(*bias);
  auto out = at::convolution(as_host(input), as_host(weight), hbias, stride, padding, dilation, transposed,
                             output_padding, groups);
  return from_host(out, input.device().index());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  std::vector<int64_t> bias_sizes{out_channels};
  auto grads = at::convolution_backward(as_host(grad_output), as_host(input), as_host(weight), bias_sizes, stride,
                                        padding, dilation, transposed, output_padding, groups, output_mask);
  // A gradient left out of output_mask is undefined (None), as the op's contract says; some host algorithms
  // return a scratch tensor there (the 1-D/2-D slow path with [True, False, True]).
  if (!output_mask[0]) std::get<0>(grads) = at::Tensor();
  if (!output_mask[1]) std::get<1>(grads) = at::Tensor();
  if (!output_mask[2]) std::get<2>(grads) = at::Tensor();
  return from_host(grads, input.device().index());
}

} // namespace neuron::native
