// NeuronCore emulator: device memory is host RAM, each core has an HBM budget.
//
// Accounting is exact: every byte handed out (or adopted from a host kernel's
// output) is counted against its core until released, so memory_allocated()
// and the OOM check see exactly what live tensors hold. No caching: host
// malloc is already fast and a cache would only blur the accounting.
#include "Runtime.h"

#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace neuron::rt {
namespace {

struct Block {
  int device;
  size_t nbytes;
  bool adopted;
};

struct State {
  std::mutex mu;
  std::vector<int64_t> budget;
  std::vector<std::string> labels;
  std::vector<CoreStats> stats;
  std::unordered_map<const void*, Block> blocks;
  bool configured = false;
  std::string unavailable;  // why configuration failed, if it did
};

State& state() {
  static State* s = new State();  // leaked on purpose: tensors may die after static destructors run
  return *s;
}

std::string human(int64_t n) {
  std::ostringstream os;
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  os.precision(u == 0 ? 0 : 2);
  os << std::fixed << v << " " << units[u];
  return os.str();
}

void check_device(const State& s, int device) {
  TORCH_CHECK(s.configured, s.unavailable.empty()
                                ? std::string("TorchNeuron runtime is not configured: import torch_neuronx first")
                                : "TorchNeuron runtime unavailable: " + s.unavailable);
  int n = static_cast<int>(s.budget.size());
  TORCH_CHECK_VALUE(
      device >= 0 && device < n, "Invalid device index neuron:", device, ": ", n,
      " NeuronCore(s) are visible to this process (valid indices 0..", n - 1,
      "). Use one of those, or make more cores visible: NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES, "
      "or a larger TORCHNEURON_INSTANCE.");
}

} // namespace

void configure(const std::vector<int64_t>& hbm_bytes, const std::vector<std::string>& labels) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  TORCH_CHECK(hbm_bytes.size() == labels.size(), "configure: one label per core");
  TORCH_CHECK(
      !s.configured || s.blocks.empty(),
      "The NeuronCore runtime cannot be reconfigured while device memory is in use");
  s.budget = hbm_bytes;
  s.labels = labels;
  s.stats.assign(hbm_bytes.size(), CoreStats{});
  s.configured = true;
}

bool configured() { return state().configured; }

void set_unavailable(const std::string& reason) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.unavailable = reason;
}
int device_count() { return static_cast<int>(state().budget.size()); }

void check_device(int device) { check_device(state(), device); }

int64_t hbm_bytes(int device) {
  auto& s = state();
  check_device(s, device);
  return s.budget[device];
}

const std::string& label(int device) {
  auto& s = state();
  check_device(s, device);
  return s.labels[device];
}

[[noreturn]] void raise_oom(int device, size_t nbytes) {
  auto& s = state();
  CoreStats st = s.stats[device];
  int64_t budget = s.budget[device];
  TORCH_CHECK_WITH(
      OutOfMemoryError, false,
      "Neuron out of memory on ", s.labels[device], ": tried to allocate ", human(nbytes),
      "; the core's HBM budget is ", human(budget), ", of which ", human(st.allocated),
      " is allocated by tensors and ", human(budget - st.allocated),
      " is free. Reduce the batch size or sequence length, shard the model across more cores "
      "(FSDP/tensor parallel), or emulate a larger instance (TORCHNEURON_INSTANCE, "
      "NEURON_LOGICAL_NC_CONFIG=2 on trn2).");
}

// Reserve nbytes on a core; false when the budget would be exceeded.
static bool reserve(State& s, int device, size_t nbytes) {
  check_device(s, device);
  auto& st = s.stats[device];
  if (st.allocated + static_cast<int64_t>(nbytes) > s.budget[device]) {
    st.num_ooms++;
    return false;
  }
  st.allocated += nbytes;
  st.peak_allocated = std::max(st.peak_allocated, st.allocated);
  st.num_allocs++;
  st.total_allocated += nbytes;
  return true;
}

void* allocate(int device, size_t nbytes) {
  auto& s = state();
  bool ok;
  {
    std::lock_guard<std::mutex> g(s.mu);
    ok = reserve(s, device, nbytes);
  }
  if (!ok) raise_oom(device, nbytes);
  void* p = nullptr;
  try {
    p = c10::alloc_cpu(nbytes);
  } catch (...) {
    std::lock_guard<std::mutex> g(s.mu);
    s.stats[device].allocated -= nbytes;
    throw;
  }
  std::lock_guard<std::mutex> g(s.mu);
  s.blocks.emplace(p, Block{device, nbytes, false});
  return p;
}

void release(void* ptr) {
  if (!ptr) return;
  auto& s = state();
  {
    std::lock_guard<std::mutex> g(s.mu);
    auto it = s.blocks.find(ptr);
    if (it == s.blocks.end()) return;  // never ours: nothing to free
    auto& st = s.stats[it->second.device];
    st.allocated -= it->second.nbytes;
    st.total_freed += it->second.nbytes;
    st.num_frees++;
    s.blocks.erase(it);
  }
  c10::free_cpu(ptr);
}

bool adopt(int device, void* ptr, size_t nbytes) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (!reserve(s, device, nbytes)) return false;
  s.blocks.emplace(ptr, Block{device, nbytes, true});
  return true;
}

void unadopt(const void* ptr) {
  // The host memory itself is freed by its original owner.
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.blocks.find(ptr);
  if (it == s.blocks.end()) return;
  auto& st = s.stats[it->second.device];
  st.allocated -= it->second.nbytes;
  st.total_freed += it->second.nbytes;
  st.num_frees++;
  s.blocks.erase(it);
}

int device_of(const void* ptr) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.blocks.find(ptr);
  return it == s.blocks.end() ? -1 : it->second.device;
}

void copy(void* dst, const void* src, size_t nbytes) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}

void synchronize(int device) {
  // Kernels run synchronously on the host: once a call returns its work is done.
  check_device(state(), device);
}

CoreStats stats(int device) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  check_device(s, device);
  return s.stats[device];
}

void reset_peak(int device) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  check_device(s, device);
  s.stats[device].peak_allocated = s.stats[device].allocated;
}

void reset_accumulated(int device) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  check_device(s, device);
  auto& st = s.stats[device];
  st.num_allocs = st.num_frees = st.num_ooms = st.total_allocated = st.total_freed = 0;
}

} // namespace neuron::rt
