// Shared declarations of the TorchNeuron C++ core.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

namespace neuron {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

// Current device of the calling thread (torch.neuron.set_device).
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
void check_index(c10::DeviceIndex index);

c10::Allocator* device_allocator();
c10::Allocator* pinned_allocator();
bool is_pinned(const void* ptr);

// Zero-copy bridge between device tensors and host (CPU) tensors. The device
// keeps its memory in host RAM, so a CPU tensor can alias it: its own CPU
// StorageImpl over the same bytes, holding a reference to the device storage.
at::Tensor host_alias(const at::Tensor& device_tensor);
// Turn a CPU tensor produced by a host kernel into a device tensor without a
// copy: its storage is adopted and counted against the core's HBM budget.
c10::Storage adopt_storage(const c10::Storage& host_storage, c10::DeviceIndex device);
at::Tensor wrap_on_storage(const at::Tensor& like, const c10::Storage& storage);
// A fresh host tensor (not aliasing device memory) as a device tensor, zero-copy.
at::Tensor from_host(const at::Tensor& host, c10::DeviceIndex device);

// RNG: the CPU generator that actually produces the numbers for a device.
at::Generator host_engine(const at::Generator& neuron_generator);
const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);

void resize_bytes(c10::StorageImpl* storage, size_t nbytes);

} // namespace neuron
