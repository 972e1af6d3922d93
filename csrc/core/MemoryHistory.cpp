// Memory history (see MemoryHistory.h). Stacks are torch's CapturedTraceback, as CUDA's allocator
// records them: frame pointers gathered cheaply now, symbolized only when a snapshot is taken.
#include "core/MemoryHistory.h"

#include <torch/csrc/profiler/combined_traceback.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_map>

namespace neuron::memory_history {
namespace {

struct State {
  std::mutex mu;
  Settings settings;
  std::vector<Event> ring;  // circular once it holds max_entries
  size_t next = 0;          // where the next event goes when the ring is full
  std::unordered_map<const void*, std::shared_ptr<c10::GatheredContext>> live;
};

std::atomic<bool> g_recording{false};

State& state() {
  static auto* s = new State();  // leaked: frees may be recorded after static destructors
  return *s;
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

void enable(const Settings& settings) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.settings = settings;
  if (s.ring.size() > settings.max_entries) {
    s.ring.clear();
    s.next = 0;
  }
  g_recording.store(true, std::memory_order_release);
}

void disable() {
  g_recording.store(false, std::memory_order_release);
  auto& s = state();
  std::vector<Event> ring;
  std::unordered_map<const void*, std::shared_ptr<c10::GatheredContext>> live;
  {
    std::lock_guard<std::mutex> g(s.mu);
    ring.swap(s.ring);
    live.swap(s.live);
    s.next = 0;
  }
  // The tracebacks are released here, outside the lock (releasing Python frames may take the GIL).
}

bool recording() { return g_recording.load(std::memory_order_relaxed); }

void record(Action action, int device, const void* ptr, size_t nbytes, int64_t allocated) {
  if (!recording()) return;
  Settings settings;
  {
    auto& s = state();
    std::lock_guard<std::mutex> g(s.mu);
    settings = s.settings;
  }
  // Gathered outside our lock: gathering Python frames takes the GIL.
  std::shared_ptr<c10::GatheredContext> context;
  if (action == Action::Free ? settings.free_context : settings.alloc_context)
    context = torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/settings.cpp);
  Event event{action, device, reinterpret_cast<uintptr_t>(ptr), nbytes, now_us(), allocated, context};
  std::shared_ptr<c10::GatheredContext> dropped;  // released outside the lock
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (!g_recording.load(std::memory_order_relaxed)) return;
  if (action == Action::Alloc) {
    s.live[ptr] = context;
  } else if (action == Action::Free) {
    auto it = s.live.find(ptr);
    if (it != s.live.end()) {
      dropped = std::move(it->second);
      s.live.erase(it);
    }
  }
  if (!s.settings.trace || s.settings.max_entries == 0) return;
  if (s.ring.size() < s.settings.max_entries) {
    s.ring.push_back(std::move(event));
  } else {
    std::swap(s.ring[s.next], event);
    dropped = std::move(event.context);
    s.next = (s.next + 1) % s.ring.size();
  }
}

std::vector<Event> trace() {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  std::vector<Event> out;
  out.reserve(s.ring.size());
  for (size_t i = 0; i < s.ring.size(); ++i) out.push_back(s.ring[(s.next + i) % s.ring.size()]);
  return out;
}

std::shared_ptr<c10::GatheredContext> alloc_context(const void* ptr) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.live.find(ptr);
  return it == s.live.end() ? nullptr : it->second;
}

} // namespace neuron::memory_history
