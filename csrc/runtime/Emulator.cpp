// NeuronCore emulator: device memory is host RAM, each core has an HBM budget.
//
// Accounting is exact: every byte handed out (or adopted from a host kernel's
// output) is counted against its core until released, so memory_allocated()
// and the OOM check see exactly what live tensors hold. No caching: host
// malloc is already fast and a cache would only blur the accounting.
#include "Runtime.h"

#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
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
  size_t mapped = 0;  // strict mode: bytes of the block's own pages (mmap), else 0 (host allocator)
  int open = 0;       // strict mode: open host accesses; the pages are PROT_NONE at 0
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

std::atomic<MemoryObserver> g_observer{nullptr};

void notify(MemoryEvent event, int device, const void* ptr, size_t nbytes, int64_t allocated) {
  if (auto observer = g_observer.load(std::memory_order_acquire)) observer(event, device, ptr, nbytes, allocated);
}

// TORCHNEURON_STRICT_MEMORY=1, read when the runtime is configured (before any allocation).
std::atomic<bool> g_strict{false};

bool strict() { return g_strict.load(std::memory_order_relaxed); }

// Strict mode: each allocation on pages of its own, inaccessible until the bridge opens it.
void* map_pages(size_t nbytes, size_t* mapped) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  *mapped = (nbytes + page - 1) / page * page;
  void* p = mmap(nullptr, *mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK(p != MAP_FAILED, "TORCHNEURON_STRICT_MEMORY: mmap of ", nbytes, " bytes failed: ", std::strerror(errno),
              " (each allocation takes whole pages; raise vm.max_map_count or run without strict memory)");
  return p;
}

void protect(void* p, size_t mapped, int prot) {
  TORCH_CHECK(mprotect(p, mapped, prot) == 0, "TORCHNEURON_STRICT_MEMORY: mprotect failed: ", std::strerror(errno));
}

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
  const char* strict_env = std::getenv("TORCHNEURON_STRICT_MEMORY");
  g_strict.store(strict_env && std::strcmp(strict_env, "1") == 0);
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
  st.live_allocs++;
  st.peak_live_allocs = std::max(st.peak_live_allocs, st.live_allocs);
  return true;
}

void* allocate(int device, size_t nbytes) {
  auto& s = state();
  bool ok;
  int64_t allocated;
  {
    std::lock_guard<std::mutex> g(s.mu);
    ok = reserve(s, device, nbytes);
    allocated = s.stats[device].allocated;
  }
  if (!ok) {
    notify(MemoryEvent::Oom, device, nullptr, nbytes, allocated);
    raise_oom(device, nbytes);
  }
  void* p = nullptr;
  size_t mapped = 0;
  try {
    p = strict() ? map_pages(nbytes, &mapped) : c10::alloc_cpu(nbytes);
  } catch (...) {
    std::lock_guard<std::mutex> g(s.mu);
    s.stats[device].allocated -= nbytes;
    s.stats[device].live_allocs--;
    throw;
  }
  {
    std::lock_guard<std::mutex> g(s.mu);
    s.blocks.emplace(p, Block{device, nbytes, false, mapped});
    allocated = s.stats[device].allocated;
  }
  notify(MemoryEvent::Alloc, device, p, nbytes, allocated);
  return p;
}

// Forget ptr (the start of an allocation) and return its block; false when it is not ours.
static bool forget(const void* ptr, Block& block, int64_t& allocated) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.blocks.find(ptr);
  if (it == s.blocks.end()) return false;
  block = it->second;
  auto& st = s.stats[block.device];
  st.allocated -= block.nbytes;
  st.total_freed += block.nbytes;
  st.num_frees++;
  st.live_allocs--;
  allocated = st.allocated;
  s.blocks.erase(it);
  return true;
}

void release(void* ptr) {
  if (!ptr) return;
  Block block;
  int64_t allocated;
  if (!forget(ptr, block, allocated)) return;  // never ours: nothing to free
  notify(MemoryEvent::Free, block.device, ptr, block.nbytes, allocated);  // before the address can be reused
  if (block.mapped) {
    munmap(ptr, block.mapped);
  } else {
    c10::free_cpu(ptr);
  }
}

bool adopts_host_memory() { return !strict(); }

bool adopt(int device, void* ptr, size_t nbytes) {
  TORCH_CHECK(!strict(), "internal: adopt() under TORCHNEURON_STRICT_MEMORY (the bridge copies instead)");
  auto& s = state();
  int64_t allocated;
  bool ok;
  {
    std::lock_guard<std::mutex> g(s.mu);
    ok = reserve(s, device, nbytes);
    if (ok) s.blocks.emplace(ptr, Block{device, nbytes, true});
    allocated = s.stats[device].allocated;
  }
  notify(ok ? MemoryEvent::Alloc : MemoryEvent::Oom, device, ok ? ptr : nullptr, nbytes, allocated);
  return ok;
}

void unadopt(const void* ptr) {
  // The host memory itself is freed by its original owner.
  Block block;
  int64_t allocated;
  if (forget(ptr, block, allocated)) notify(MemoryEvent::Free, block.device, ptr, block.nbytes, allocated);
}

void set_memory_observer(MemoryObserver observer) { g_observer.store(observer, std::memory_order_release); }

std::vector<LiveBlock> live_blocks() {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  std::vector<LiveBlock> out;
  out.reserve(s.blocks.size());
  for (const auto& [ptr, block] : s.blocks) out.push_back({ptr, block.device, block.nbytes});
  return out;
}

int device_of(const void* ptr) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.blocks.find(ptr);
  return it == s.blocks.end() ? -1 : it->second.device;
}

void* open_host_access(void* allocation) {
  if (!strict()) return allocation;
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.blocks.find(allocation);
  if (it != s.blocks.end() && it->second.mapped && it->second.open++ == 0)
    protect(allocation, it->second.mapped, PROT_READ | PROT_WRITE);
  return allocation;
}

void close_host_access(void* allocation) {
  if (!strict()) return;
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.blocks.find(allocation);
  if (it != s.blocks.end() && it->second.mapped && --it->second.open == 0)
    protect(allocation, it->second.mapped, PROT_NONE);
}

bool guards_host_access() { return strict(); }

// The emulator's DMA: a memcpy, with the allocations open for its duration.
void copy_host_to_device(void* device, size_t offset, const void* host, size_t nbytes) {
  if (!nbytes) return;
  std::memcpy(static_cast<char*>(open_host_access(device)) + offset, host, nbytes);
  close_host_access(device);
}

void copy_device_to_host(void* host, const void* device, size_t offset, size_t nbytes) {
  if (!nbytes) return;
  void* d = const_cast<void*>(device);
  std::memcpy(host, static_cast<const char*>(open_host_access(d)) + offset, nbytes);
  close_host_access(d);
}

void copy_device_to_device(void* dst, size_t dst_offset, const void* src, size_t src_offset, size_t nbytes) {
  if (!nbytes) return;
  void* s = const_cast<void*>(src);
  std::memmove(static_cast<char*>(open_host_access(dst)) + dst_offset,
               static_cast<const char*>(open_host_access(s)) + src_offset, nbytes);
  close_host_access(s);
  close_host_access(dst);
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
  s.stats[device].peak_live_allocs = s.stats[device].live_allocs;
}

void reset_accumulated(int device) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  check_device(s, device);
  auto& st = s.stats[device];
  st.num_allocs = st.num_frees = st.num_ooms = st.total_allocated = st.total_freed = 0;
}

} // namespace neuron::rt
