// Device memory (HBM of a NeuronCore, through the runtime seam) and pinned host memory.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>

#include <cstddef>

namespace neuron {

// Allocates on the calling thread's current device.
c10::Allocator* device_allocator();
// An allocation on core `device`, whichever core is current.
c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes);
// Host memory for DataLoader(pin_memory=True); is_pinned answers for it.
c10::Allocator* pinned_allocator();
bool is_pinned(const void* ptr);

// Resize a device storage in place (FSDP2's untyped_storage().resize_(), resize_ of tensors).
void resize_bytes(c10::StorageImpl* storage, size_t nbytes);

} // namespace neuron
