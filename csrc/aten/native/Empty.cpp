// Factories: a neuron tensor's memory comes from the device allocator of its core.
#include "aten/native/Native.h"
#include "core/Allocator.h"
#include "core/Device.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>

namespace neuron::native {
namespace {

c10::DeviceIndex index_of(std::optional<c10::Device> device) {
  if (!device || !device->has_index()) return current_device();
  TORCH_CHECK(device->type() == kNeuron, "expected a neuron device, got ", *device);
  check_index(device->index());
  return device->index();
}

} // namespace

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  c10::DeviceGuard guard(c10::Device(kNeuron, index_of(device)));
  return at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  c10::DeviceGuard guard(c10::Device(kNeuron, index_of(device)));
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

} // namespace neuron::native
