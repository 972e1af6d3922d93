// The emulator's cache of freed host blocks: the host memory behind device allocations, kept for reuse.
//
// An eager step frees and allocates the same activation sizes op after op. Through host malloc each of
// those mid-sized blocks (KiBs to MiBs) goes through glibc's bins, splits and coalescing, and comes back at
// another address whose lines and pages are cold; taken back from here, a block of the size just freed is
// the one freed last (LIFO), still in the CPU caches. Measured on bench/eager.py's per-op step: ~2% of
// the step (docs/runtime.md). CUDA's caching allocator does the same for the same reason.
//
// Only host memory is cached, never accounting: a cached block belongs to no core, so memory_allocated(),
// memory_reserved(), mem_get_info() and the HBM budget see live tensors only, and what runs out of memory
// on Trainium runs out here at the same byte. The cache is bounded (kMaxCachedBytes, blocks up to
// kMaxBlockBytes: the big ones gain nothing, malloc maps them fresh) and torch.neuron.empty_cache()
// returns it to the host. Not thread-safe: the caller locks. AddressSanitizer builds do not cache, so a
// use after free still faults there (scripts/sanitize.sh).
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

namespace neuron::rt {

class HostBlockCache {
 public:
  static constexpr size_t kMaxBlockBytes = size_t(4) << 20;
  static constexpr size_t kMaxCachedBytes = size_t(128) << 20;
  static constexpr size_t kGranule = 256;  // sizes round up to this, so near sizes share a bin

#if defined(__SANITIZE_ADDRESS__)
  static constexpr bool kEnabled = false;
#else
  static constexpr bool kEnabled = true;
#endif

  // The host size of a block for nbytes; 0 when blocks of that size are not cached.
  static size_t host_size(size_t nbytes) {
    if (!kEnabled || nbytes > kMaxBlockBytes) return 0;
    return (nbytes + kGranule - 1) / kGranule * kGranule;
  }

  // A cached block of host_size bytes (the last one given back), or null.
  void* take(size_t host_size) {
    auto it = bins_.find(host_size);
    if (it == bins_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_bytes_ -= host_size;
    return p;
  }

  // Keeps a freed block for reuse; false when the cache is full (the caller frees it).
  bool give(void* p, size_t host_size) {
    if (cached_bytes_ + host_size > kMaxCachedBytes) return false;
    bins_[host_size].push_back(p);
    cached_bytes_ += host_size;
    return true;
  }

  // Empties the cache into `out` (the caller frees the blocks outside its lock).
  void drain(std::vector<void*>& out) {
    for (auto& [size, blocks] : bins_) out.insert(out.end(), blocks.begin(), blocks.end());
    bins_.clear();
    cached_bytes_ = 0;
  }

  size_t cached_bytes() const { return cached_bytes_; }

 private:
  std::unordered_map<size_t, std::vector<void*>> bins_;
  size_t cached_bytes_ = 0;
};

} // namespace neuron::rt
