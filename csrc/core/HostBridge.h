// The bridge between device tensors and host (CPU) tensors.
//
// The emulator keeps device memory in host RAM, so a CPU tensor can alias it:
// its own CPU StorageImpl over the same bytes, holding a reference to the
// device storage. A host kernel's fresh output becomes device memory the other
// way round, by adoption (no copy; counted against the core's HBM budget).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>

namespace neuron {

// A tensor with `like`'s geometry (sizes, strides, offset, dtype, conj/neg bits) over `storage`, on the
// storage's device. The one place a tensor is made over an existing storage.
at::Tensor tensor_over(const at::Tensor& like, const c10::Storage& storage);
// A CPU storage over the same bytes as `device_storage`.
c10::Storage host_storage(const c10::Storage& device_storage);
// A CPU tensor over the same bytes as `device_tensor`.
at::Tensor host_alias(const at::Tensor& device_tensor);
// Turn a CPU storage produced by a host kernel into device storage without a copy.
c10::Storage adopt_storage(const c10::Storage& host_storage, c10::DeviceIndex device);
// A fresh host tensor (not aliasing device memory) as a device tensor, zero-copy.
at::Tensor from_host(const at::Tensor& host, c10::DeviceIndex device);

} // namespace neuron
