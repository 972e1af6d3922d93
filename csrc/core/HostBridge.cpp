// The host bridge (HostBridge.h): the one way host code reaches device memory.
//
// A CPU alias gets its *own* StorageImpl over the same bytes (sharing the device
// StorageImpl would make views created inside CPU kernels report the neuron
// device); the alias's DataPtr context holds a reference to the device storage
// (so the memory outlives the alias) and the open host access, closed when the
// alias dies. In the other direction, a host kernel's fresh output is adopted:
// the device storage's DataPtr keeps the host storage alive and the bytes are
// counted against the core's HBM budget; a runtime that cannot adopt host
// memory (strict mode) gets a copy instead.
#include "core/HostBridge.h"
#include "core/Allocator.h"
#include "core/Device.h"
#include "runtime/Runtime.h"

#include <c10/core/CPUAllocator.h>

namespace neuron {
namespace {

// What a host alias holds: a reference to the device storage, and, where the runtime guards host access, the
// allocation it opened (the storage's data pointer at that moment: an out= argument's storage may be given new
// memory while the alias lives). Without a guard the context is the device StorageImpl itself, so an alias
// costs no allocation of its own (the fallback makes one per device argument of every op).
struct AliasContext {
  c10::Storage device;
  void* opened;
};

void release_guarded_alias(void* ctx) {
  auto* alias = static_cast<AliasContext*>(ctx);
  rt::close_host_access(alias->opened);
  delete alias;
}

void release_alias(void* device_storage) {
  c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(device_storage));
}

// An adopted host storage: the device DataPtr's context is the host StorageImpl (one reference).
void release_adopted(void* host_storage) {
  auto* host = static_cast<c10::StorageImpl*>(host_storage);
  rt::unadopt(host->data());  // first forget it, then free it: the address may be reused at once
  c10::raw::intrusive_ptr::decref(host);
}

bool is_neuron(const at::TensorBase& t) { return t.defined() && t.device().type() == kNeuron; }

} // namespace

at::Tensor tensor_over(const at::Tensor& like, const c10::Storage& storage) {
  auto key = storage.device_type() == kNeuron ? c10::DispatchKey::PrivateUse1 : c10::DispatchKey::CPU;
  auto keys = c10::DispatchKeySet(key);
  // A ZeroTensor (no memory) stays one on either side: host kernels that handle ZeroTensors themselves
  // (dot, matmul) see one, and a ZeroTensor a host kernel returns becomes a neuron ZeroTensor.
  if (like._is_zerotensor()) keys = keys | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  auto out = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage), keys, like.dtype());
  auto* o = out.unsafeGetTensorImpl();
  o->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  if (like.is_conj()) o->_set_conj(true);
  if (like.is_neg()) o->_set_neg(true);
  return out;
}

c10::Storage host_storage(const c10::Storage& storage) {
  void* device = const_cast<void*>(storage.data());
  c10::DataPtr ptr;
  if (device == nullptr) {  // no memory (a ZeroTensor's storage, an empty one): nothing to open
    ptr = c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU));
  } else if (rt::guards_host_access()) {
    void* data = rt::open_host_access(device);
    ptr = c10::DataPtr(data, new AliasContext{storage, device}, &release_guarded_alias, c10::Device(c10::DeviceType::CPU));
  } else {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    c10::raw::intrusive_ptr::incref(impl);
    ptr = c10::DataPtr(device, impl, &release_alias, c10::Device(c10::DeviceType::CPU));
  }
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), storage.nbytes(), std::move(ptr), c10::GetCPUAllocator(),
      /*resizable=*/true));
}

at::Tensor host_alias(const at::Tensor& t) { return tensor_over(t, host_storage(t.storage())); }

c10::Storage storage_to_device(const c10::Storage& host, c10::DeviceIndex device) {
  size_t nbytes = host.nbytes();
  void* data = const_cast<void*>(host.data());
  c10::DataPtr ptr;
  if (data == nullptr || nbytes == 0) {
    ptr = c10::DataPtr(nullptr, c10::Device(kNeuron, device));
  } else if (rt::adopts_host_memory()) {
    if (!rt::adopt(device, data, nbytes)) rt::raise_oom(device, nbytes);
    c10::StorageImpl* impl = host.unsafeGetStorageImpl();
    c10::raw::intrusive_ptr::incref(impl);
    ptr = c10::DataPtr(data, impl, &release_adopted, c10::Device(kNeuron, device));
  } else {
    ptr = allocate_on(device, nbytes);
    rt::copy_host_to_device(ptr.get(), 0, data, nbytes);
  }
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), nbytes, std::move(ptr), device_allocator(), /*resizable=*/true));
}

at::Tensor from_host(const at::Tensor& host, c10::DeviceIndex device) {
  if (!host.defined()) return host;
  return tensor_over(host, storage_to_device(host.storage(), device));
}

HostAccess::HostAccess() : guarded_(rt::guards_host_access()) {}

void HostAccess::open(const at::TensorBase& t) {
  if (!guarded_ || !is_neuron(t)) return;
  const c10::Storage& storage = t.storage();
  void* allocation = const_cast<void*>(storage.data());
  rt::open_host_access(allocation);
  opened_.emplace_back(storage, allocation);
}

void HostAccess::close() {
  for (auto& [storage, allocation] : opened_) rt::close_host_access(allocation);
  opened_.clear();
}

} // namespace neuron
