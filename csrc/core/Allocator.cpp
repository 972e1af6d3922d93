// Device allocator (HBM of the current core, via the runtime seam) and the
// pinned host allocator that DataLoader(pin_memory=True) needs.
#include "core/Allocator.h"
#include "core/Device.h"
#include "runtime/Runtime.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <mutex>
#include <unordered_set>

namespace neuron {
namespace {

void delete_device_memory(void* ptr) {
  rt::release(ptr);  // no GIL here: deleters run from any thread, including autograd's
}

// A c10::DeviceAllocator, so torch.accelerator's memory API works for neuron.
// Every byte it reports is held by a live tensor: the runtime's cache of freed host blocks is counted on
// no core (runtime/HostBlockCache.h); emptyCache returns it to the host.
struct DeviceAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    auto device = current_device();
    void* p = nbytes ? rt::allocate(device, nbytes) : nullptr;
    return {p, p, &delete_device_memory, c10::Device(kNeuron, device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_device_memory; }
  void copy_data(void* dst, const void* src, size_t count) const override {
    rt::copy_device_to_device(dst, 0, src, 0, count);
  }

  bool initialized() override { return rt::configured(); }
  void emptyCache(c10::MempoolId_t) override { rt::empty_cache(); }
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    auto s = rt::stats(device);
    c10::CachingDeviceAllocator::DeviceStats out;
    auto fill = [](c10::CachingAllocator::Stat& st, int64_t current, int64_t peak, int64_t allocated, int64_t freed) {
      st.current = current;
      st.peak = peak;
      st.allocated = allocated;
      st.freed = freed;
    };
    constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    for (auto* arr : {&out.allocated_bytes, &out.reserved_bytes, &out.active_bytes, &out.requested_bytes})
      fill((*arr)[kAll], s.allocated, s.peak_allocated, s.total_allocated, s.total_freed);
    for (auto* arr : {&out.allocation, &out.active, &out.segment})
      fill((*arr)[kAll], s.live_allocs, s.peak_live_allocs, s.num_allocs, s.num_frees);
    out.num_ooms = s.num_ooms;
    return out;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override { rt::reset_accumulated(device); }
  void resetPeakStats(c10::DeviceIndex device) override { rt::reset_peak(device); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    auto total = rt::hbm_bytes(device);
    return {static_cast<size_t>(total - rt::bank_allocated(device)), static_cast<size_t>(total)};  // a bank may be shared
  }
};

// Pinned host memory: page-locked on real hardware; here host memory that we
// remember, so is_pinned() answers truthfully.
struct PinnedRegistry {
  std::mutex mu;
  std::unordered_set<const void*> ptrs;
};
PinnedRegistry& pinned_registry() {
  static auto* r = new PinnedRegistry();
  return *r;
}

void delete_pinned(void* ptr) {
  {
    auto& r = pinned_registry();
    std::lock_guard<std::mutex> g(r.mu);
    r.ptrs.erase(ptr);
  }
  c10::free_cpu(ptr);
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* p = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (p) {
      auto& r = pinned_registry();
      std::lock_guard<std::mutex> g(r.mu);
      r.ptrs.insert(p);
    }
    return {p, p, &delete_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_pinned; }
  void copy_data(void* dst, const void* src, size_t count) const override {
    std::memcpy(dst, src, count);
  }
};

DeviceAllocator g_device_allocator;
PinnedAllocator g_pinned_allocator;

} // namespace

c10::Allocator* device_allocator() { return &g_device_allocator; }
c10::Allocator* pinned_allocator() { return &g_pinned_allocator; }

bool is_pinned(const void* ptr) {
  auto& r = pinned_registry();
  std::lock_guard<std::mutex> g(r.mu);
  return r.ptrs.count(ptr) > 0;
}

c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes) {
  c10::DeviceIndex prev = current_device();
  if (prev == device) return g_device_allocator.allocate(nbytes);
  set_current_device(device);
  c10::DataPtr out;
  try {
    out = g_device_allocator.allocate(nbytes);
  } catch (...) {
    set_current_device(prev);
    throw;
  }
  set_current_device(prev);
  return out;
}

// A fresh allocation on the storage's own core, then a copy of what fits: device memory does not
// grow in place.
void resize_bytes(c10::StorageImpl* storage, size_t nbytes) {
  TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
  size_t old = storage->nbytes();
  if (nbytes == old) return;
  c10::DeviceIndex device = storage->device().has_index() ? storage->device().index() : current_device();
  c10::DataPtr fresh = allocate_on(device, nbytes);
  if (old && nbytes && storage->data())
    rt::copy_device_to_device(fresh.get(), 0, storage->data(), 0, std::min(old, nbytes));
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(nbytes);
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_device_allocator);

} // namespace neuron
