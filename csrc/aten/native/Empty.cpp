// Factories: a neuron tensor's memory comes from the device allocator of its core.
#include "aten/native/Native.h"
#include "aten/native/OpTracking.h"
#include "core/Allocator.h"
#include "core/Device.h"
#include "runtime/Runtime.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/TensorFactories.h>
#include <c10/core/DeviceGuard.h>

namespace neuron::native {

c10::DeviceIndex index_of(std::optional<c10::Device> device) {
  if (!device || !device->has_index()) return current_device();
  TORCH_CHECK(device->type() == kNeuron, "expected a neuron device, got ", *device);
  rt::check_device(device->index());
  return device->index();
}

at::Tensor empty_on_core(c10::DeviceIndex index, at::IntArrayRef size, std::optional<at::IntArrayRef> stride,
                         at::ScalarType dtype, std::optional<at::MemoryFormat> memory_format) {
  // The allocator serves the current device: make the tensor's core current while it allocates.
  std::optional<c10::DeviceGuard> guard;
  if (index != current_device()) guard.emplace(c10::Device(kNeuron, index));
  auto keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  if (stride) return at::detail::empty_strided_generic(size, *stride, device_allocator(), keys, dtype);
  return at::detail::empty_generic(size, device_allocator(), keys, dtype, memory_format);
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  NEURON_TRACK_ALLOCATION("aten::empty.memory_format");
  return empty_on_core(index_of(device), size, std::nullopt, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  NEURON_TRACK_ALLOCATION("aten::empty_strided");
  return empty_on_core(index_of(device), size, stride, c10::dtype_or_default(dtype), std::nullopt);
}

// A ZeroTensor: no memory, every op sees zeros. Autograd formulas return one for a gradient known to be
// zero (sgn's backward, the imaginary part of a real input's gradient, ...). Built as CPU and CUDA build
// theirs: the ZeroTensor key over the device's, a storage of ZeroTensorAllocator (null data, tagged with
// the device). Ops reach it through ATen's ZeroTensor kernels, which materialise zeros on the device where
// an op needs data; the fallback's CPU kernel built a CPU ZeroTensor that was then taken for device
// memory, and any use of it crashed the process.
at::Tensor efficientzerotensor(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory) {
  at::native::ZeroTensorAllocator allocator(c10::Device(kNeuron, index_of(device)));
  auto keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &allocator, keys, c10::dtype_or_default(dtype), std::nullopt);
}

} // namespace neuron::native
