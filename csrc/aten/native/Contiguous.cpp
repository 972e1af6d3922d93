// contiguous(memory_format=torch.preserve_format) on a neuron tensor: TorchNeuron accepts it and makes the
// tensor contiguous (its contiguous op maps preserve to the contiguous format); PyTorch's own composite
// refuses preserve for every device. The neuron kernel sits at the autograd key, where the composite would
// run (and at the device key, as TorchNeuron registers it; op tracking records it as aten::contiguous), and
// hands every other format to that composite, so gradients and channels_last behave as in PyTorch.
#include "aten/native/Native.h"

#include <ATen/ops/contiguous_native.h>

namespace neuron::native {

at::Tensor contiguous(const at::Tensor& self, at::MemoryFormat memory_format) {
  return at::native::contiguous(
      self, memory_format == at::MemoryFormat::Preserve ? at::MemoryFormat::Contiguous : memory_format);
}

} // namespace neuron::native
