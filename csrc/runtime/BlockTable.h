// The emulator's table of live allocations: start address -> what it knows about the block.
//
// Every allocation and release of every op looks it up (twice per op output), so it is a flat
// open-addressing table (linear probing, backward-shift deletion): one probe touches one or two
// adjacent cache lines and an insert allocates nothing, where a node-based std::unordered_map takes a
// malloc and a free per block and a pointer chase per lookup. Not thread-safe: the caller locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace neuron::rt {

template <class Value>
class BlockTable {
 public:
  BlockTable() : slots_(kInitialCapacity) {}

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // The block starting at `key`, or nullptr.
  Value* find(const void* key) {
    if (!key) return nullptr;
    for (size_t i = home(key);; i = next(i)) {
      Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (!s.key) return nullptr;
    }
  }

  // Records a block; `key` (an allocation's start, never null) is not in the table.
  void insert(const void* key, const Value& value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    place(key, value);
    ++size_;
  }

  // Forgets the block at `key` and returns it; false when there is none.
  bool take(const void* key, Value& out) {
    if (!key) return false;
    size_t i = home(key);
    for (;; i = next(i)) {
      if (slots_[i].key == key) break;
      if (!slots_[i].key) return false;
    }
    out = slots_[i].value;
    // Backward-shift deletion: move later members of the probe run into the hole, so that no
    // lookup stops early at it (no tombstones, so the table never degrades).
    for (size_t j = next(i);; j = next(j)) {
      const void* k = slots_[j].key;
      if (!k) break;
      size_t h = home(k);
      // Stays put if its home lies cyclically in (i, j]; else it moves into the hole at i.
      bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i].key = nullptr;
    --size_;
    return true;
  }

  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.key) f(s.key, s.value);
  }

 private:
  struct Slot {
    const void* key = nullptr;
    Value value{};
  };
  static constexpr size_t kInitialCapacity = 1024;  // a power of two

  size_t home(const void* key) const {
    // Fibonacci hashing of the address (allocations are 16-byte aligned: the low bits say nothing).
    uint64_t h = (reinterpret_cast<uintptr_t>(key) >> 4) * 0x9E3779B97F4A7C15ULL;
    return static_cast<size_t>(h >> 32) & (slots_.size() - 1);
  }
  size_t next(size_t i) const { return (i + 1) & (slots_.size() - 1); }

  void place(const void* key, const Value& value) {
    size_t i = home(key);
    while (slots_[i].key) i = next(i);
    slots_[i].key = key;
    slots_[i].value = value;
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old)
      if (s.key) place(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

} // namespace neuron::rt
