// The runtime's memory observer: tells PyTorch's profiler about device memory (profile_memory=True shows
// neuron allocations, as CUDA's allocator does) and feeds the memory history when it records.
#include "core/Device.h"
#include "core/MemoryHistory.h"
#include "runtime/Runtime.h"

#include <c10/core/Allocator.h>

namespace neuron {
namespace {

void observe(rt::MemoryEvent event, int device, const void* ptr, size_t nbytes, int64_t allocated) {
  if (c10::memoryProfilingEnabled()) {
    c10::Device dev(kNeuron, static_cast<c10::DeviceIndex>(device));
    auto total = static_cast<size_t>(allocated);
    if (event == rt::MemoryEvent::Oom) {
      c10::reportOutOfMemoryToProfiler(static_cast<int64_t>(nbytes), total, total, dev);
    } else {
      auto delta = static_cast<int64_t>(nbytes);
      c10::reportMemoryUsageToProfiler(
          const_cast<void*>(ptr), event == rt::MemoryEvent::Alloc ? delta : -delta, total, total, dev);
    }
  }
  if (memory_history::recording()) {
    auto action = event == rt::MemoryEvent::Alloc  ? memory_history::Action::Alloc
                  : event == rt::MemoryEvent::Free ? memory_history::Action::Free
                                                   : memory_history::Action::Oom;
    memory_history::record(action, device, ptr, nbytes, allocated);
  }
}

const bool g_installed = (rt::set_memory_observer(&observe), true);

} // namespace
} // namespace neuron
