// NeuronCore emulator: device memory is host RAM, each HBM bank has a budget.
//
// Accounting is exact: every byte handed out (or adopted from a host kernel's
// output) is counted against its core and the core's HBM bank until released,
// so memory_allocated() and the OOM check see exactly what live tensors hold.
// A bank usually belongs to one core; at LNC=1 on Trainium2/3 the two physical
// cores of a pair share theirs, so one may use more than half of it while its
// neighbour uses less, and a busy neighbour makes it run out early, as on the
// hardware. Freed host blocks are kept for reuse (HostBlockCache.h), never
// counted: the accounting sees live tensors only.
#include "Runtime.h"
#include "BlockTable.h"
#include "HostBlockCache.h"

#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <sys/file.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sstream>
#include <map>
#include <set>
#include <unordered_map>

namespace neuron::rt {
namespace {

struct Block {
  int device;
  size_t nbytes;
  bool adopted;
  size_t mapped = 0;  // strict mode: bytes of the block's own pages (mmap), else 0 (host allocator)
  int open = 0;       // strict mode: open host accesses; the pages are PROT_NONE at 0
  uint64_t generation = 0;  // strict mode: tells a block from a later one at the same address
  size_t shared = 0;        // bytes taken from the shared arena (share_device_memory), else 0
};

// The shared arena (share_device_memory): one memfd, mapped once, carved by best fit into page-aligned
// blocks. Freed blocks coalesce and keep their pages: the next allocation of that range reuses them and
// the peers' page tables for it stay valid (fresh pages per allocation, as malloc's mmap gives large
// blocks, would cost every peer a page fault per page per collective). Under State::mu.
class SharedArena {
 public:
  bool create(size_t bytes) {
    fd_ = ::memfd_create("torchneuron-device-memory", MFD_CLOEXEC);
    if (fd_ < 0) return false;
    // Sparse: pages are taken when first written, as malloc's.
    void* p = ::ftruncate(fd_, static_cast<off_t>(bytes)) == 0
                  ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, 0)
                  : MAP_FAILED;
    if (p == MAP_FAILED) {
      ::close(fd_);
      fd_ = -1;
      return false;
    }
    base_ = static_cast<char*>(p);
    bytes_ = bytes;
    insert(0, bytes);
    return true;
  }
  bool active() const { return fd_ >= 0; }
  // In a child made by fork(): the arena's pages become private copy-on-write ones, as the rest of the
  // memory (the child never writes its parent's tensors), and the child takes no more blocks from it.
  void after_fork() {
    if (fd_ < 0) return;
    ::mmap(base_, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, fd_, 0);
    ::close(fd_);
    fd_ = -1;
  }
  SharedMemory describe() const { return {fd_, base_, bytes_}; }
  static size_t rounded(size_t nbytes) { return (nbytes + kPage - 1) / kPage * kPage; }

  // Page-aligned memory of rounded(nbytes), or null when no free range is large enough.
  void* take(size_t length) {
    auto it = free_by_length_.lower_bound({length, 0});
    if (it == free_by_length_.end()) return nullptr;
    const auto [have, offset] = *it;
    erase(offset, have);
    if (have > length) insert(offset + length, have - length);
    return base_ + offset;
  }
  void give(void* p, size_t length) {
    size_t offset = static_cast<size_t>(static_cast<char*>(p) - base_);
    auto next = free_at_.find(offset + length);
    if (next != free_at_.end()) {
      length += next->second;
      erase(next->first, next->second);
    }
    auto prev = free_at_.lower_bound(offset);
    if (prev != free_at_.begin() && (--prev)->first + prev->second == offset) {
      offset = prev->first;
      length += prev->second;
      erase(prev->first, prev->second);
    }
    insert(offset, length);
  }

 private:
  static constexpr size_t kPage = 4096;
  void insert(size_t offset, size_t length) {
    free_at_.emplace(offset, length);
    free_by_length_.emplace(length, offset);
  }
  void erase(size_t offset, size_t length) {
    free_at_.erase(offset);
    free_by_length_.erase({length, offset});
  }
  int fd_ = -1;
  char* base_ = nullptr;
  size_t bytes_ = 0;
  std::map<size_t, size_t> free_at_;                   // offset -> length
  std::set<std::pair<size_t, size_t>> free_by_length_;  // (length, offset): best fit
};

struct State {
  std::mutex mu;
  std::vector<int64_t> budget;      // per device: its bank's budget
  std::vector<std::string> labels;
  std::vector<CoreStats> stats;
  std::vector<int> bank;            // per device: index into bank_used
  std::vector<int64_t> bank_used;   // bytes held on each bank by all its cores
  std::vector<bool> attached;       // per device: does this process hold it
  std::string detached_reason;
  int default_device = 0;
  // Core ownership (set_core_registry): lock files per device, whether this process holds them,
  // and where it publishes the device's bytes in use (a slot in the first lock file, mmap'd).
  std::vector<std::vector<std::string>> lock_files;
  std::vector<std::string> lock_header;
  std::vector<bool> held;
  std::vector<int64_t*> usage_slot;
  BlockTable<Block> blocks;
  HostBlockCache cache;  // freed host blocks, for reuse (never counted on a core)
  SharedArena arena;     // share_device_memory
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

// Strict mode: the calling thread's host-access scope (begin_host_access_scope): its depth and the
// blocks allocated in it, open until it ends.
thread_local int t_scope_depth = 0;
thread_local std::vector<std::pair<void*, uint64_t>> t_scope_blocks;
uint64_t g_generation = 0;  // under State::mu

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

// The runtime starts at the first call that needs the cores (set_starter).
std::atomic<std::function<void()>*> g_starter{nullptr};
std::atomic<bool> g_started{false};

void ensure_started() {
  if (g_started.load(std::memory_order_acquire)) return;
  static thread_local bool starting = false;  // the starter configures the cores: calls it makes must not recurse
  auto* starter = g_starter.load(std::memory_order_acquire);
  if (starter == nullptr || starting) return;
  starting = true;
  try {
    (*starter)();
  } catch (...) {
    starting = false;
    throw;
  }
  starting = false;
  g_started.store(true, std::memory_order_release);
}

// The state of a started runtime: what every call about the cores uses.
State& started_state() {
  ensure_started();
  return state();
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

// Lock file layout: a text header (who holds the core) padded to kUsageOffset, then the holder's
// bytes in use on the device and their peak (max_memory_allocated) as two int64, kept current through a
// shared mapping: two stores per allocation, no system call (read by ownership.held_cores, `torchneuron top`).
constexpr off_t kUsageOffset = 128;
constexpr off_t kLockFileSize = kUsageOffset + 2 * sizeof(int64_t);

std::string read_holder(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  auto pid_at = line.find("pid ");
  if (pid_at == std::string::npos) return "another process";
  std::string pid = line.substr(pid_at + 4, line.find(' ', pid_at + 4) - pid_at - 4);
  std::ifstream cmd("/proc/" + pid + "/cmdline");
  std::string arg, command;
  while (std::getline(cmd, arg, '\0') && command.size() < 80) command += (command.empty() ? "" : " ") + arg;
  return "process " + pid + (command.empty() ? "" : " (" + command + ")");
}

// Take every lock file of the device; on a held one, release what was taken and raise.
void acquire_core(State& s, int device) {
  std::vector<int> fds;
  auto give_back = [&] {
    for (int fd : fds) ::close(fd);
  };
  for (const auto& path : s.lock_files[device]) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
      int err = errno;
      if (fd >= 0) ::close(fd);
      give_back();
      TORCH_CHECK(false, "Cannot use the core registry file ", path, " for ", s.labels[device], ": ",
                  fd < 0 ? std::strerror(err) : "it is not a regular file owned by you",
                  ". Point TORCHNEURON_CORE_REGISTRY at a private directory.");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      give_back();
      std::string holder = read_holder(path);
      TORCH_CHECK(false, s.labels[device], " is held by ", holder,
                  ": on Neuron a process reserves the NeuronCores it uses until it exits, and a second process "
                  "asking for a held core fails (nrt_allocate_neuron_cores). Stop the holder (a stale process "
                  "is the usual cause; `torchneuron ls` lists holders), or give this process free cores with "
                  "NEURON_RT_VISIBLE_CORES=<core or range>.");
    }
    fds.push_back(fd);
  }
  std::string header = s.lock_header[device];
  header.resize(kUsageOffset - 1, ' ');
  header += '\n';
  for (int fd : fds) {
    int64_t zero[2] = {0, 0};
    if (::ftruncate(fd, kLockFileSize) != 0 || ::pwrite(fd, header.data(), header.size(), 0) < 0 ||
        ::pwrite(fd, zero, sizeof(zero), kUsageOffset) < 0) {
      // Ownership holds through the lock; only the published details are missing.
    }
  }
  if (!fds.empty()) {
    void* map = ::mmap(nullptr, kLockFileSize, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    if (map != MAP_FAILED)
      s.usage_slot[device] = reinterpret_cast<int64_t*>(static_cast<char*>(map) + kUsageOffset);
  }
  s.held[device] = true;  // the descriptors stay open until the process exits: the kernel drops the locks
}

void publish_usage(State& s, int device) {
  if (int64_t* slot = s.usage_slot[device]) {
    __atomic_store_n(slot, s.stats[device].allocated, __ATOMIC_RELAXED);
    __atomic_store_n(slot + 1, s.stats[device].peak_allocated, __ATOMIC_RELAXED);
  }
}

void check_device(const State& s, int64_t device) {
  TORCH_CHECK(s.configured, s.unavailable.empty()
                                ? std::string("TorchNeuron runtime is not configured: import torch_neuronx first")
                                : "TorchNeuron runtime unavailable: " + s.unavailable);
  int64_t n = static_cast<int64_t>(s.budget.size());
  TORCH_CHECK(
      device >= 0 && device < n, "Invalid device index neuron:", device, ": Device index ", device,
      " is out of range. Valid range is 0 to ", n - 1, " for this process (", n,
      " NeuronCore(s) visible). Use one of those, or make more cores visible: NEURON_RT_VISIBLE_CORES / "
      "NEURON_RT_NUM_CORES, or a larger TORCHNEURON_INSTANCE.");
}

// A valid index this process holds: under a launcher, a sibling rank's core is a valid index but not ours.
void check_usable(const State& s, int device) {
  check_device(s, device);
  TORCH_CHECK(s.attached[device], s.labels[device], " is not attached to this process: ", s.detached_reason);
}

} // namespace

void configure(const std::vector<int64_t>& hbm_bytes, const std::vector<std::string>& labels,
               const std::vector<int64_t>& banks, const std::vector<bool>& attached,
               const std::string& detached_reason, int default_device) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  size_t n = hbm_bytes.size();
  TORCH_CHECK(labels.size() == n && banks.size() == n && attached.size() == n,
              "configure: one label, bank and attachment per core");
  TORCH_CHECK(
      !s.configured || s.blocks.empty(),
      "The NeuronCore runtime cannot be reconfigured while device memory is in use");
  s.budget = hbm_bytes;
  s.labels = labels;
  s.stats.assign(n, CoreStats{});
  s.attached = attached;
  s.detached_reason = detached_reason;
  s.default_device = default_device;
  // Dense bank indices: devices with the same bank id share one counter.
  std::unordered_map<int64_t, int> dense;
  s.bank.assign(n, 0);
  for (size_t i = 0; i < n; ++i) s.bank[i] = dense.emplace(banks[i], static_cast<int>(dense.size())).first->second;
  s.bank_used.assign(dense.size(), 0);
  s.lock_files.clear();
  s.held.assign(n, false);
  s.usage_slot.assign(n, nullptr);
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
int device_count() { return static_cast<int>(started_state().budget.size()); }

void check_device(int64_t device) { check_device(started_state(), device); }

int default_device() { return started_state().default_device; }

void set_starter(std::function<void()> start) {
  auto* previous = g_starter.exchange(new std::function<void()>(std::move(start)));  // leaked: called until exit
  (void)previous;
}

bool started() { return g_started.load(std::memory_order_acquire) || state().configured; }

void set_core_registry(const std::vector<std::vector<std::string>>& lock_files,
                       const std::vector<std::string>& header) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  TORCH_CHECK(lock_files.size() == s.budget.size() && header.size() == s.budget.size(),
              "set_core_registry: one entry per device");
  s.lock_files = lock_files;
  s.lock_header = header;
}

void check_attached(int device) {
  auto& s = started_state();
  std::lock_guard<std::mutex> g(s.mu);
  check_usable(s, device);
}

int64_t bank_allocated(int device) {
  auto& s = started_state();
  std::lock_guard<std::mutex> g(s.mu);
  check_usable(s, device);
  return s.bank_used[s.bank[device]];
}

int64_t hbm_bytes(int device) {
  auto& s = started_state();
  check_usable(s, device);
  return s.budget[device];
}

const std::string& label(int device) {
  auto& s = started_state();
  check_device(s, device);
  return s.labels[device];
}

[[noreturn]] void raise_oom(int device, size_t nbytes) {
  auto& s = state();
  std::string neighbours;
  int64_t budget, own, used;
  {
    std::lock_guard<std::mutex> g(s.mu);
    budget = s.budget[device];
    own = s.stats[device].allocated;
    used = s.bank_used[s.bank[device]];
    for (size_t i = 0; i < s.bank.size(); ++i)
      if (static_cast<int>(i) != device && s.bank[i] == s.bank[device])
        neighbours += (neighbours.empty() ? "" : ", ") + s.labels[i] + " holds " + human(s.stats[i].allocated);
  }
  int64_t others = used - own;  // a neighbour's share (this process's or, when it is not ours, nothing counted)
  TORCH_CHECK_WITH(
      OutOfMemoryError, false,
      "Neuron out of memory on ", s.labels[device], ": tried to allocate ", human(nbytes),
      "; the core's HBM budget is ", human(budget), " (its bank less the runtime's reserve), of which ",
      human(own), " is allocated by its tensors",
      neighbours.empty() ? std::string()
                         : ", " + human(others) + " by the neighbour sharing its bank at LNC=1 (" + neighbours + ")",
      " and ", human(budget - used),
      " is free. Reduce the batch size or sequence length, shard the model across more cores "
      "(FSDP/tensor parallel), or emulate a larger instance (TORCHNEURON_INSTANCE, "
      "NEURON_LOGICAL_NC_CONFIG=2 on trn2/trn3).");
}

// The emulator keeps device memory in host RAM, and a core's HBM budget (24 GiB on trn2) can be more than
// the host has left. A large request the host cannot back would be killed by the kernel's OOM killer while
// it is filled (the job, or a neighbour, lost without a word), so it fails here first, with the cause and
// the fix. Only requests of kHostCheckBytes and more are checked: reading /proc/meminfo costs ~20 us, noise
// next to filling 64 MiB, and small allocations are never the ones that take the host down at once.
constexpr size_t kHostCheckBytes = size_t(64) << 20;

// MemAvailable of /proc/meminfo in bytes (what the host can give without swapping), or -1 if unknown.
static int64_t host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

// Frees the cached host blocks (HostBlockCache.h); true when there were any.
static bool drain_host_cache(State& s) {
  std::vector<void*> blocks;
  {
    std::lock_guard<std::mutex> g(s.mu);
    s.cache.drain(blocks);
  }
  for (void* p : blocks) c10::free_cpu(p);
  return !blocks.empty();
}

static void check_host_backing(State& s, int device, size_t nbytes) {
  if (nbytes < kHostCheckBytes) return;
  int64_t available = host_available_bytes();
  if (static_cast<int64_t>(nbytes) > available && drain_host_cache(s)) available = host_available_bytes();
  if (available < 0 || static_cast<int64_t>(nbytes) <= available) return;
  int64_t budget, used, own;
  {
    std::lock_guard<std::mutex> g(s.mu);
    check_usable(s, device);  // the device's own error first (reserve checks it again, on every allocation)
    budget = s.budget[device];
    used = s.bank_used[s.bank[device]];
    own = s.stats[device].allocated;
  }
  if (static_cast<int64_t>(nbytes) > budget - used) return;  // over the budget too: Neuron's own OOM, raised by reserve
  notify(MemoryEvent::Oom, device, nullptr, nbytes, own);  // as allocate's: the device's own bytes, not the bank's
  TORCH_CHECK_WITH(
      OutOfMemoryError, false,
      "Neuron emulator out of host memory on ", s.labels[device], ": tried to allocate ", human(nbytes),
      ", which the core's HBM budget allows (", human(budget - used), " of ", human(budget),
      " free), but this host has only ", human(available),
      " of RAM available, and the emulator keeps device memory in host RAM. On Trainium the allocation "
      "would fit. Allocate less here (for a memory-sized pool such as Transformers' continuous batching cache, "
      "give its size: ContinuousBatchingConfig(num_blocks=...)), or set TORCHNEURON_HBM_PER_CORE to what this "
      "machine can back, so that code sizing itself from torch.neuron.mem_get_info() asks for less.");
}

// Reserve nbytes on a core; false when the budget would be exceeded.
static bool reserve(State& s, int device, size_t nbytes) {
  check_usable(s, device);
  if (!s.held[device] && !s.lock_files.empty()) acquire_core(s, device);  // first use: take the core
  auto& st = s.stats[device];
  auto& bank = s.bank_used[s.bank[device]];
  if (bank + static_cast<int64_t>(nbytes) > s.budget[device]) {
    st.num_ooms++;
    return false;
  }
  bank += nbytes;
  st.allocated += nbytes;
  st.peak_allocated = std::max(st.peak_allocated, st.allocated);
  publish_usage(s, device);
  st.num_allocs++;
  st.total_allocated += nbytes;
  st.live_allocs++;
  st.peak_live_allocs = std::max(st.peak_live_allocs, st.live_allocs);
  return true;
}

// One critical section per allocation (it is on every op's path): the budget is reserved, the host memory
// taken and the block recorded under one lock; a refused request takes no host memory.
void* allocate(int device, size_t nbytes) {
  auto& s = started_state();
  check_host_backing(s, device, nbytes);
  void* p = nullptr;
  int64_t allocated;
  bool ok;
  {
    std::lock_guard<std::mutex> g(s.mu);
    ok = reserve(s, device, nbytes);
    if (!ok) {
      allocated = s.stats[device].allocated;
    } else {
      size_t mapped = 0, shared = 0;
      try {
        if (strict()) {
          p = map_pages(nbytes, &mapped);
        } else if (s.arena.active() && nbytes >= kSharedMinBytes && (p = s.arena.take(SharedArena::rounded(nbytes)))) {
          shared = SharedArena::rounded(nbytes);
        } else if (size_t host = HostBlockCache::host_size(nbytes)) {
          p = s.cache.take(host);
          if (!p) p = c10::alloc_cpu(host);
        } else {
          p = c10::alloc_cpu(nbytes);
        }
      } catch (...) {
        s.stats[device].allocated -= nbytes;
        s.stats[device].live_allocs--;
        s.bank_used[s.bank[device]] -= nbytes;
        publish_usage(s, device);
        throw;
      }
      Block block{device, nbytes, false, mapped};
      block.shared = shared;
      if (mapped && t_scope_depth > 0) {  // opened for the thread's host-access scope
        block.generation = ++g_generation;
        block.open = 1;
        protect(p, mapped, PROT_READ | PROT_WRITE);
        t_scope_blocks.emplace_back(p, block.generation);
      }
      s.blocks.insert(p, block);
      allocated = s.stats[device].allocated;
    }
  }
  if (!ok) {
    notify(MemoryEvent::Oom, device, nullptr, nbytes, allocated);
    raise_oom(device, nbytes);
  }
  notify(MemoryEvent::Alloc, device, p, nbytes, allocated);
  return p;
}

// Forget ptr (the start of an allocation) and return its block; false when it is not ours.
static bool forget(const void* ptr, Block& block, int64_t& allocated) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (!s.blocks.take(ptr, block)) return false;
  auto& st = s.stats[block.device];
  st.allocated -= block.nbytes;
  s.bank_used[s.bank[block.device]] -= block.nbytes;
  publish_usage(s, block.device);
  st.total_freed += block.nbytes;
  st.num_frees++;
  st.live_allocs--;
  allocated = st.allocated;
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
  } else if (block.shared) {
    auto& s = state();
    std::lock_guard<std::mutex> g(s.mu);
    s.arena.give(ptr, block.shared);
  } else {
    // Only a block allocate() took at its host size goes to the cache: an adopted one is not that size.
    if (size_t host = block.adopted ? 0 : HostBlockCache::host_size(block.nbytes)) {
      auto& s = state();
      std::lock_guard<std::mutex> g(s.mu);
      if (s.cache.give(ptr, host)) return;
    }
    c10::free_cpu(ptr);  // not cached, or the cache is full
  }
}

void empty_cache() { drain_host_cache(state()); }

size_t cached_host_bytes() {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return s.cache.cached_bytes();
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
    if (ok) s.blocks.insert(ptr, Block{device, nbytes, true});
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
  s.blocks.for_each([&](const void* ptr, const Block& block) { out.push_back({ptr, block.device, block.nbytes}); });
  return out;
}

int device_of(const void* ptr) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  const Block* block = s.blocks.find(ptr);
  return block ? block->device : -1;
}

void* open_host_access(void* allocation) {
  if (!strict()) return allocation;
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  Block* block = s.blocks.find(allocation);
  if (block && block->mapped && block->open++ == 0) protect(allocation, block->mapped, PROT_READ | PROT_WRITE);
  return allocation;
}

void close_host_access(void* allocation) {
  if (!strict()) return;
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  Block* block = s.blocks.find(allocation);
  if (block && block->mapped && --block->open == 0) protect(allocation, block->mapped, PROT_NONE);
}

bool guards_host_access() { return strict(); }

void begin_host_access_scope() {
  if (strict()) ++t_scope_depth;
}

void end_host_access_scope() {
  if (!strict() || --t_scope_depth > 0) return;
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  for (auto& [ptr, generation] : t_scope_blocks) {
    Block* block = s.blocks.find(ptr);  // released meanwhile, or another block at the same address: nothing to close
    if (block && block->generation == generation && --block->open == 0) protect(ptr, block->mapped, PROT_NONE);
  }
  t_scope_blocks.clear();
}

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

void share_device_memory() {
  auto& s = state();
  // Cached blocks of kSharedMinBytes and more would no longer be taken (the arena serves those sizes):
  // back to the host with them.
  drain_host_cache(s);
  std::lock_guard<std::mutex> g(s.mu);
  if (strict() || s.arena.active() || !s.configured) return;  // strict: each block on pages of its own
  // Address space, not memory: twice what this process's cores may hold (room for fragmentation).
  // Allocations that find no room fall back to private memory (collectives then stage them).
  const int64_t budget = s.budget.empty() ? 0 : s.budget[std::clamp(s.default_device, 0, static_cast<int>(s.budget.size()) - 1)];
  const size_t bytes = std::clamp<size_t>(2 * static_cast<size_t>(std::max<int64_t>(budget, 0)), size_t(1) << 30,
                                          size_t(1) << 38);
  if (!s.arena.create(bytes)) return;  // the host cannot (no memfd): private memory, as before
  static bool registered = false;
  if (!registered) registered = ::pthread_atfork(nullptr, nullptr, [] { state().arena.after_fork(); }) == 0;
}

SharedMemory shared_memory() {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return s.arena.describe();
}

void synchronize(int device) {
  // Kernels run synchronously on the host: once a call returns its work is done.
  check_device(state(), device);
}

CoreStats stats(int device) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  check_usable(s, device);
  return s.stats[device];
}

void reset_peak(int device) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  check_usable(s, device);
  s.stats[device].peak_allocated = s.stats[device].allocated;
  s.stats[device].peak_live_allocs = s.stats[device].live_allocs;
  publish_usage(s, device);
}

void reset_accumulated(int device) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  check_usable(s, device);
  auto& st = s.stats[device];
  st.num_allocs = st.num_frees = st.num_ooms = st.total_allocated = st.total_freed = 0;
}

} // namespace neuron::rt
