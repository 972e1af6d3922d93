// The host bridge: the one way host code reads or writes device memory.
//
// Host kernels (the fallback, the host kernel path, the process group,
// compiled graphs) reach device bytes only through it; it opens them through
// the runtime (rt::open_host_access) for exactly as long as host code holds
// them. The emulator keeps device memory in host RAM, so a CPU tensor can alias
// it: its own CPU StorageImpl over the same bytes, holding a reference to the
// device storage and the open access. A host kernel's fresh output becomes
// device memory the other way round: adopted without a copy where the runtime
// can (the emulator), else copied host-to-device (strict mode, a real runtime).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>
#include <c10/util/SmallVector.h>

#include <tuple>
#include <utility>

namespace neuron {

// A tensor with `like`'s geometry (sizes, strides, offset, dtype, conj/neg bits) over `storage`, on the
// storage's device. The one place a tensor is made over an existing storage.
at::Tensor tensor_over(const at::Tensor& like, const c10::Storage& storage);
// A CPU storage over the same bytes as `device_storage`, open for host access until it dies.
c10::Storage host_storage(const c10::Storage& device_storage);
// A CPU tensor over the same bytes as `device_tensor` (host_storage).
at::Tensor host_alias(const at::Tensor& device_tensor);
// A CPU storage produced by a host kernel as device storage of `device`: adopted (no copy) where
// the runtime can, else a fresh allocation filled host-to-device.
c10::Storage storage_to_device(const c10::Storage& host_storage, c10::DeviceIndex device);
// A fresh host tensor (not aliasing device memory) as a device tensor (storage_to_device).
at::Tensor from_host(const at::Tensor& host, c10::DeviceIndex device);
// A host kernel's tuple of fresh results, each as from_host (undefined ones stay undefined).
template <class... T>
std::tuple<T...> from_host(const std::tuple<T...>& hosts, c10::DeviceIndex device) {
  return std::apply([&](const auto&... h) { return std::make_tuple(from_host(h, device)...); }, hosts);
}

// Device tensors opened for host access in place, until close() or destruction: for host code that
// computes on device tensors themselves rather than on host aliases (the host kernel path, compiled
// graphs). Holds their storages while open. Nothing to do when the runtime does not guard access.
class HostAccess {
 public:
  HostAccess();
  HostAccess(const HostAccess&) = delete;
  HostAccess& operator=(const HostAccess&) = delete;
  ~HostAccess() { close(); }
  void open(const at::TensorBase& tensor);  // CPU and undefined tensors are ignored
  void close();

 private:
  bool guarded_;
  c10::SmallVector<std::pair<c10::Storage, void*>, 4> opened_;
};

} // namespace neuron
