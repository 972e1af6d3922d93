#include "distributed/SharedSegment.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include <climits>

#include <dirent.h>
#include <sched.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace neuron::distributed {
namespace {

constexpr uint64_t kMagic = 0x4e45555253484d31;  // "NEURSHM1"
const char* const kNamePrefix = "torchneuron-";

struct Header {
  uint64_t magic;
  uint64_t token;  // random: a stale segment of the same name is never mistaken for this one
  int32_t size;
};

// Each rank's process, as peers check it is still alive: (pid, start time). A
// pid alone is not enough: an exited rank stays a zombie until its launcher
// reaps it, and its pid may be reused.
struct Process {
  int64_t pid;
  uint64_t start_time;  // /proc/<pid>/stat field 22
};

constexpr size_t kProcessesOffset = 64;

size_t header_bytes(int size) {
  return (kProcessesOffset + sizeof(Process) * size + 4095) / 4096 * 4096;  // the data starts page-aligned
}

// Start time and state of a process, from /proc/<pid>/stat; false if there is no such process.
bool read_stat(int64_t pid, uint64_t& start_time, char& state) {
  FILE* f = std::fopen(c10::str("/proc/", pid, "/stat").c_str(), "r");
  if (!f) return false;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');  // the command name may contain spaces and parentheses
  if (!p) return false;
  std::istringstream in(p + 2);
  std::string field;
  in >> state;
  for (int i = 4; i < 22 && in >> field; ++i) {
  }
  return static_cast<bool>(in >> start_time);
}

Process self() {
  Process me{getpid(), 0};
  char state = 0;
  read_stat(me.pid, me.start_time, state);
  return me;
}

bool alive(const Process& p) {
  uint64_t start = 0;
  char state = 0;
  return read_stat(p.pid, start, state) && start == p.start_time && state != 'Z' && state != 'X';
}

void* map(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Names a crashed job left behind (its creator died between creating and unlinking): those whose
// creator process is gone and that are older than any connect() still waiting for its ranks.
void remove_leftovers() {
  DIR* dir = opendir("/dev/shm");
  if (!dir) return;
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  while (dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name.rfind(kNamePrefix, 0) != 0) continue;
    // torchneuron-<kind>-<pid>-<token>
    auto last = name.rfind('-');
    auto before = last == std::string::npos ? std::string::npos : name.rfind('-', last - 1);
    if (before == std::string::npos) continue;
    long pid = std::strtol(name.c_str() + before + 1, nullptr, 10);
    struct stat st {};
    if (pid <= 0 || stat(("/dev/shm/" + name).c_str(), &st) != 0 || st.st_uid != getuid()) continue;
    if (now - st.st_mtime < 3600 || access(c10::str("/proc/", pid).c_str(), F_OK) == 0) continue;
    shm_unlink(("/" + name).c_str());
  }
  closedir(dir);
}

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// What a rank waiting for its peers does before it sleeps on a futex word: polls `reached()` a little
// (true: it came). A peer running on another CPU often arrives within a microsecond or two, and a sleep
// puts a wake-up (a futex call by the last arrival, the scheduler bringing this rank back: tens of
// microseconds on a VM) on every waiting rank's path. 200 pauses (~10 us) with a CPU per rank; 64
// otherwise, since the peer being waited for may need this CPU to arrive at all. Polling longer (20000
// polls, ~0.5 ms) was measured 15x slower for a 1 KiB all_reduce on a shared, loaded host than sleeping
// at once: it takes the CPU from the peer.
template <typename Reached>
bool poll_briefly(bool cpu_per_rank, Reached&& reached) {
  const int polls = cpu_per_rank ? 200 : 64;
  for (int i = 0; i < polls; ++i) {
    if (reached()) return true;
    cpu_relax();
  }
  return false;
}

} // namespace

std::unique_ptr<SharedSegment> SharedSegment::connect(c10d::Store& store, const std::string& kind, int rank, int size,
                                                      size_t bytes) {
  const std::string prefix = "neuron_shm/" + kind + "/";
  const size_t header = header_bytes(size);
  const size_t mapped = header + (bytes + 4095) / 4096 * 4096;
  void* base = nullptr;
  std::string published;
  if (rank == 0) {
    remove_leftovers();
    uint64_t token = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    std::ostringstream name;
    name << "/" << kNamePrefix << kind << "-" << getpid() << "-" << std::hex << token;
    int fd = shm_open(name.str().c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) {
      // posix_fallocate commits the pages: a full /dev/shm fails here instead of raising SIGBUS on first touch.
      if (ftruncate(fd, static_cast<off_t>(mapped)) == 0 && posix_fallocate(fd, 0, static_cast<off_t>(mapped)) == 0) {
        base = map(fd, mapped);
      }
      close(fd);
      if (base) {
        auto* h = static_cast<Header*>(base);
        h->magic = kMagic;
        h->token = token;
        h->size = size;
        published = name.str() + " " + std::to_string(token);
      } else {
        shm_unlink(name.str().c_str());
      }
    }
    store.set(prefix + "name", published);  // empty: this host cannot make a segment
  } else {
    published = store.get_to_str(prefix + "name");
    if (!published.empty()) {
      std::istringstream in(published);
      std::string name;
      uint64_t token = 0;
      in >> name >> token;
      int fd = shm_open(name.c_str(), O_RDWR, 0);  // fails on another host: the name is local to rank 0's
      if (fd >= 0) {
        base = map(fd, mapped);
        close(fd);
      }
      auto* h = static_cast<Header*>(base);
      if (base && (h->magic != kMagic || h->token != token || h->size != size)) {
        munmap(base, mapped);  // a segment of that name, but not ours (another host's namespace)
        base = nullptr;
      }
    }
  }
  auto* processes = base ? reinterpret_cast<Process*>(static_cast<char*>(base) + kProcessesOffset) : nullptr;
  if (base) processes[rank] = self();
  // Every rank reports its host if it mapped the segment, then whether it sees every peer's
  // process (same pid namespace): the segment is used only if all did, on one host.
  auto report_and_agree = [&](const std::string& what, const std::string& mine) {
    store.set(prefix + what + "/" + std::to_string(rank), mine);
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back(prefix + what + "/" + std::to_string(r));
    store.wait(keys);
    bool all = true;
    for (const auto& k : keys) all = all && store.get_to_str(k) == mine;
    return all && !mine.empty();
  };
  bool all = report_and_agree("host", base ? hostname() : "");
  if (all) {
    bool sees_all = true;
    for (int r = 0; r < size; ++r) sees_all = sees_all && alive(processes[r]);
    all = report_and_agree("visible", sees_all ? "1" : "0");
  }
  if (rank == 0 && !published.empty()) {
    shm_unlink(published.substr(0, published.find(' ')).c_str());  // all have mapped it: nothing to leak
  }
  if (!all) {
    if (base) munmap(base, mapped);
    return nullptr;
  }
  return std::unique_ptr<SharedSegment>(new SharedSegment(base, mapped, header, rank, size));
}

SharedSegment::SharedSegment(void* base, size_t mapped, size_t header, int rank, int size)
    : base_(base),
      mapped_(mapped),
      data_(static_cast<char*>(base) + header),
      bytes_(mapped - header),
      rank_(rank),
      size_(size) {}

SharedSegment::~SharedSegment() { munmap(base_, mapped_); }

int64_t SharedSegment::pid(int rank) const {
  return reinterpret_cast<const Process*>(static_cast<const char*>(base_) + kProcessesOffset)[rank].pid;
}

std::string SharedSegment::dead_peers() const {
  const auto* processes = reinterpret_cast<const Process*>(static_cast<const char*>(base_) + kProcessesOffset);
  std::string dead;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && !alive(processes[r])) {
      dead += c10::str(dead.empty() ? "" : ", ", "rank ", r, " (pid ", processes[r].pid, ")");
    }
  }
  return dead;
}

void SharedSegment::throw_if_peers_lost(std::chrono::steady_clock::time_point start, std::chrono::milliseconds timeout,
                                        std::chrono::steady_clock::time_point& next_check) const {
  const auto t = std::chrono::steady_clock::now();
  if (t < next_check) return;
  next_check = t + kCheckEvery;
  if (auto dead = dead_peers(); !dead.empty()) {
    C10_THROW_ERROR(DistBackendError, c10::str(dead, " exited (noticed in shared memory)"));
  }
  if (t > start + timeout) {
    C10_THROW_ERROR(DistBackendError, c10::str("timed out after ", timeout.count(),
                                               " ms waiting for the other ranks (process group timeout)"));
  }
}

bool SharedSegment::arrive(uint32_t* arrived, uint32_t* sleepers, uint32_t target) {
  // seq_cst with wait_arrivals' registration: either the last arrival sees a sleeper, or the sleeper sees
  // the new count before it sleeps.
  if (std::atomic_ref<uint32_t>(*arrived).fetch_add(1, std::memory_order_seq_cst) + 1 != target) return false;
  if (std::atomic_ref<uint32_t>(*sleepers).load(std::memory_order_seq_cst) > 0) futex_wake_all_shared(arrived);
  return true;
}

void SharedSegment::wait_arrivals(uint32_t* arrived, uint32_t* sleepers, uint32_t target, bool cpu_per_rank,
                                  std::chrono::milliseconds timeout) const {
  std::atomic_ref<uint32_t> count(*arrived);
  std::atomic_ref<uint32_t> asleep(*sleepers);
  auto reached = [&](uint32_t now) { return static_cast<int32_t>(now - target) >= 0; };
  if (poll_briefly(cpu_per_rank, [&] { return reached(count.load(std::memory_order_acquire)); })) return;
  const auto start = std::chrono::steady_clock::now();
  auto next_check = start + kCheckEvery;
  for (;;) {
    // Registered as a sleeper before reading the word (both seq_cst): the last arrival either sees the
    // registration and wakes us, or bumped the word before our futex_wait compares it.
    asleep.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t now = count.load(std::memory_order_seq_cst);
    if (!reached(now)) futex_wait_shared(arrived, now, kCheckEvery);
    asleep.fetch_sub(1, std::memory_order_seq_cst);
    if (reached(count.load(std::memory_order_acquire))) return;
    throw_if_peers_lost(start, timeout, next_check);
  }
}

bool has_cpu_per_rank(int size) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return false;
  return size <= CPU_COUNT(&set);
}

void futex_wait_shared(uint32_t* word, uint32_t expected, std::chrono::milliseconds at_most) {
  timespec ts{static_cast<time_t>(at_most.count() / 1000), static_cast<long>(at_most.count() % 1000) * 1000000};
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);  // not _PRIVATE: the word is shared
}

void futex_wake_all_shared(uint32_t* word) { syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

} // namespace neuron::distributed
