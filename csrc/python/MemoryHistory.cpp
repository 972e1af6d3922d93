// Bindings of the memory history: recording switches and the snapshot in the format of
// torch.cuda.memory._snapshot() (segments + device_traces), which torch.cuda._memory_viz reads.
#include "core/MemoryHistory.h"
#include "runtime/Runtime.h"

#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/extension.h>

#include <algorithm>
#include <unordered_map>

namespace py = pybind11;

// From torch/csrc/profiler/python/combined_traceback.h (libtorch_python), declared here because that header
// includes nlohmann/json.hpp, which the torch wheel does not ship.
namespace torch {
TORCH_API std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
TORCH_PYTHON_API void freeDeadCapturedTracebackFrames();
TORCH_PYTHON_API void installCapturedTracebackPython();
} // namespace torch

namespace neuron {
namespace {

constexpr size_t kSmallSize = 1 << 20;  // CUDA's small-pool limit: how the visualizer labels segments

// Symbolizes many tracebacks at once (frames shared between them are resolved once).
struct Symbolizer {
  std::vector<torch::CapturedTraceback*> pending;
  std::vector<py::dict*> targets;

  void add(const std::shared_ptr<c10::GatheredContext>& context, py::dict& target) {
    if (auto* tb = dynamic_cast<torch::CapturedTraceback*>(context.get())) {
      pending.push_back(tb);
      targets.push_back(&target);
    } else {
      target["frames"] = py::list();
    }
  }
  void run() {
    auto frames = torch::py_symbolize(pending);
    for (size_t i = 0; i < frames.size(); ++i) (*targets[i])["frames"] = frames[i];
  }
};

py::dict snapshot() {
  torch::freeDeadCapturedTracebackFrames();
  auto blocks = rt::live_blocks();
  std::sort(blocks.begin(), blocks.end(), [](const rt::LiveBlock& a, const rt::LiveBlock& b) {
    return a.device != b.device ? a.device < b.device : a.ptr < b.ptr;
  });
  auto events = memory_history::trace();
  std::vector<std::shared_ptr<c10::GatheredContext>> keep_alive;  // contexts referenced by `pending`

  // Dicts are built first and kept in vectors so the symbolizer can fill "frames" into them.
  std::vector<py::dict> segment_dicts(blocks.size()), block_dicts(blocks.size()), event_dicts(events.size());
  Symbolizer symbolizer;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto& b = blocks[i];
    auto addr = reinterpret_cast<uintptr_t>(b.ptr);
    auto context = memory_history::alloc_context(b.ptr);
    keep_alive.push_back(context);
    auto& block = block_dicts[i];
    block["address"] = addr;
    block["size"] = b.nbytes;
    block["requested_size"] = b.nbytes;
    block["state"] = "active_allocated";
    symbolizer.add(context, block);
    // No core counts a cached block (runtime/HostBlockCache.h): every allocation is a segment of its own holding one block.
    auto& seg = segment_dicts[i];
    seg["device"] = b.device;
    seg["address"] = addr;
    seg["total_size"] = b.nbytes;
    seg["allocated_size"] = b.nbytes;
    seg["active_size"] = b.nbytes;
    seg["requested_size"] = b.nbytes;
    seg["stream"] = 0;
    seg["segment_type"] = b.nbytes <= kSmallSize ? "small" : "large";
    seg["segment_pool_id"] = py::make_tuple(0, 0);
    seg["is_expandable"] = false;
    symbolizer.add(context, seg);
  }
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    auto& ev = event_dicts[i];
    ev["addr"] = e.addr;
    ev["size"] = e.size;
    ev["stream"] = 0;
    ev["time_us"] = e.time_us;
    ev["device"] = e.device;
    ev["allocated"] = e.allocated;
    if (e.action == memory_history::Action::Oom) ev["device_free"] = rt::hbm_bytes(e.device) - e.allocated;
    symbolizer.add(e.context, ev);
  }
  symbolizer.run();

  int n = rt::device_count();
  py::list segments, device_traces;
  std::vector<py::list> per_device(n);
  for (size_t i = 0; i < blocks.size(); ++i) {
    py::list seg_blocks;
    seg_blocks.append(block_dicts[i]);
    segment_dicts[i]["blocks"] = seg_blocks;
    segments.append(segment_dicts[i]);
  }
  // Each allocation is its own segment, so its events are those CUDA's allocator records for a fresh
  // segment: segment_alloc + alloc, then free_requested + free_completed + segment_free.
  auto emit = [](py::list& out, const py::dict& ev, const char* action) {
    py::dict copy = ev.attr("copy")();  // py::dict(ev) would alias it
    copy["action"] = action;
    out.append(copy);
  };
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    if (e.device < 0 || e.device >= n) continue;
    auto& out = per_device[e.device];
    const auto& ev = event_dicts[i];
    switch (e.action) {
      case memory_history::Action::Alloc:
        emit(out, ev, "segment_alloc");
        emit(out, ev, "alloc");
        break;
      case memory_history::Action::Free:
        emit(out, ev, "free_requested");
        emit(out, ev, "free_completed");
        emit(out, ev, "segment_free");
        break;
      case memory_history::Action::Oom:
        emit(out, ev, "oom");
        break;
    }
  }
  for (auto& l : per_device) device_traces.append(l);
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = device_traces;
  return out;
}

} // namespace

void bind_memory_history(py::module& m) {
  m.def("_memory_history_enable", [](bool trace, bool alloc_context, bool free_context, bool cpp, size_t max_entries) {
    torch::installCapturedTracebackPython();
    memory_history::enable({trace, alloc_context, free_context, cpp, max_entries});
  });
  m.def("_memory_history_disable", [] {
    py::gil_scoped_release release;
    memory_history::disable();
  });
  m.def("_memory_history_recording", &memory_history::recording);
  m.def("_memory_snapshot", &snapshot);
}

} // namespace neuron
