// A per-thread direct-mapped cache keyed by an op's schema address, in front of a slower lookup of the op's
// entry (a map keyed by name or schema, locked or not). The boxed kernels that serve many ops (the fallback,
// the boxed composite recorder) look their op up on every call: with the cache that is one compare.
// Entries must live as long as the process (the cache keeps raw pointers and is never invalidated).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace neuron {

// `lookup(op)` returns the op's entry (a T*) on a miss. Each call site (each `lookup` type) has its own cache.
template <class T, size_t kSlots, class Lookup>
T* cached_by_schema(const c10::OperatorHandle& op, Lookup&& lookup) {
  struct Slot {
    const void* key = nullptr;
    T* value = nullptr;
  };
  thread_local std::array<Slot, kSlots> cache;
  const void* key = &op.schema();
  Slot& slot = cache[(reinterpret_cast<uintptr_t>(key) >> 4) % kSlots];
  if (slot.key != key) slot = Slot{key, lookup(op)};
  return slot.value;
}

} // namespace neuron
