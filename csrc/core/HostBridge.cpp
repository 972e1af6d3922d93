// Zero-copy bridge between neuron tensors and host (CPU) tensors.
//
// Device memory is host RAM, so a host kernel can work on it in place. A CPU
// alias gets its *own* StorageImpl over the same bytes (sharing the device
// StorageImpl would make views created inside CPU kernels report the neuron
// device); the alias's DataPtr context holds a reference to the device storage
// so the memory outlives the alias. In the other direction, a host kernel's
// fresh output is adopted: the device storage's DataPtr keeps the host
// storage alive and the bytes are counted against the core's HBM budget.
#include "core/HostBridge.h"
#include "core/Allocator.h"
#include "core/Device.h"
#include "runtime/Runtime.h"

#include <c10/core/CPUAllocator.h>

namespace neuron {
namespace {

void release_alias(void* ctx) { delete static_cast<c10::Storage*>(ctx); }

void release_adopted(void* ctx) {
  auto* host = static_cast<c10::Storage*>(ctx);
  rt::unadopt(host->data());  // first forget it, then free it: the address may be reused at once
  delete host;
}

} // namespace

at::Tensor tensor_over(const at::Tensor& like, const c10::Storage& storage) {
  auto key = storage.device_type() == kNeuron ? c10::DispatchKey::PrivateUse1 : c10::DispatchKey::CPU;
  auto out = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage), c10::DispatchKeySet(key), like.dtype());
  auto* o = out.unsafeGetTensorImpl();
  o->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  if (like.is_conj()) o->_set_conj(true);
  if (like.is_neg()) o->_set_neg(true);
  return out;
}

c10::Storage host_storage(const c10::Storage& storage) {
  void* data = const_cast<void*>(storage.data());
  c10::DataPtr ptr(data, new c10::Storage(storage), &release_alias, c10::Device(c10::DeviceType::CPU));
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), storage.nbytes(), std::move(ptr), c10::GetCPUAllocator(),
      /*resizable=*/true));
}

at::Tensor host_alias(const at::Tensor& t) { return tensor_over(t, host_storage(t.storage())); }

c10::Storage adopt_storage(const c10::Storage& host, c10::DeviceIndex device) {
  size_t nbytes = host.nbytes();
  void* data = const_cast<void*>(host.data());
  c10::DataPtr ptr;
  if (data == nullptr || nbytes == 0) {
    ptr = c10::DataPtr(nullptr, c10::Device(kNeuron, device));
  } else {
    if (!rt::adopt(device, data, nbytes)) rt::raise_oom(device, nbytes);
    ptr = c10::DataPtr(data, new c10::Storage(host), &release_adopted, c10::Device(kNeuron, device));
  }
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), nbytes, std::move(ptr), device_allocator(), /*resizable=*/true));
}

at::Tensor from_host(const at::Tensor& host, c10::DeviceIndex device) {
  if (!host.defined()) return host;
  return tensor_over(host, adopt_storage(host.storage(), device));
}

} // namespace neuron
