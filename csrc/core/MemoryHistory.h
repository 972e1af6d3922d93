// Memory history: the allocation and free events of device memory with the stack that caused each, kept
// while recording is on (torch.neuron.memory._record_memory_history), for memory snapshots that PyTorch's
// memory visualizer opens. Off, it costs the runtime's observer one relaxed atomic load per event.
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace neuron::memory_history {

enum class Action { Alloc, Free, Oom };

struct Event {
  Action action;
  int device;
  uintptr_t addr;
  size_t size;
  int64_t time_us;
  int64_t allocated;  // the core's allocated bytes after the event (for an OOM: what was in use)
  std::shared_ptr<c10::GatheredContext> context;  // null when stacks are not recorded for this action
};

struct Settings {
  bool trace = false;         // keep alloc/free events (enabled="all"), not only the stacks of live blocks
  bool alloc_context = true;  // gather a stack on allocation (context not None)
  bool free_context = false;  // gather a stack on free too (context="all")
  bool cpp = false;           // C++ frames as well as Python ones (stacks="all")
  size_t max_entries = SIZE_MAX;
};

// Start (or change) recording; clears nothing already recorded.
void enable(const Settings& settings);
// Stop recording and drop what was recorded.
void disable();
bool recording();

// Called by the runtime's memory observer.
void record(Action action, int device, const void* ptr, size_t nbytes, int64_t allocated);

// The recorded trace (oldest first) and the stack of each live block that was allocated while recording.
std::vector<Event> trace();
std::shared_ptr<c10::GatheredContext> alloc_context(const void* ptr);

} // namespace neuron::memory_history
