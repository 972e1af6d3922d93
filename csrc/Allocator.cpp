// Device allocator (HBM of the current core, via the runtime seam) and the
// pinned host allocator that DataLoader(pin_memory=True) needs.
#include "Neuron.h"
#include "runtime/Runtime.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <mutex>
#include <unordered_set>

namespace neuron {
namespace {

void delete_device_memory(void* ptr) {
  rt::release(ptr);  // no GIL here: deleters run from any thread, including autograd's
}

struct DeviceAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    auto device = current_device();
    void* p = nbytes ? rt::allocate(device, nbytes) : nullptr;
    return {p, p, &delete_device_memory, c10::Device(kNeuron, device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_device_memory; }
  void copy_data(void* dst, const void* src, size_t count) const override {
    rt::copy(dst, src, count);
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

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_device_allocator);

} // namespace neuron
