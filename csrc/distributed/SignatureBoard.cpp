#include "distributed/SignatureBoard.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace neuron::distributed {
namespace {

constexpr uint64_t kMagic = 0x4e45555242524431;  // "NEURBRD1"
// Collectives that may be in flight at once per group (async ones, each checked when it completes).
constexpr uint32_t kSlots = 16;
constexpr size_t kPidsOffset = 64;

struct Header {
  uint64_t magic;
  uint64_t token;    // random: a stale board of the same name is never mistaken for this one
  int32_t size;
};

// One slot per collective in flight; collective i uses slot i % kSlots. Followed by the
// released stamps (uint32 per rank) and the rows (kMaxFields int64 per rank).
struct Slot {
  uint32_t arrived;    // futex word: posts to this slot so far, all its uses together (wraps)
  uint32_t pad;
  uint64_t first;      // (use + 1) << 32 | rank of the first rank to post that use: the reference
};

// Each rank's process, as peers check it is still alive: (pid, start time). A
// pid alone is not enough: an exited rank stays a zombie until its launcher
// reaps it, and its pid may be reused.
struct Process {
  int64_t pid;
  uint64_t start_time;  // /proc/<pid>/stat field 22
};

size_t rows_offset(int size) { return (kPidsOffset + sizeof(Process) * size + 63) / 64 * 64; }

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

size_t released_offset() { return sizeof(Slot); }
size_t slot_rows_offset(int size) { return (released_offset() + sizeof(uint32_t) * size + 63) / 64 * 64; }
size_t slot_bytes(int size) {
  return (slot_rows_offset(size) + sizeof(int64_t) * size * SignatureBoard::kMaxFields + 63) / 64 * 64;
}

size_t board_bytes(int size) { return rows_offset(size) + kSlots * slot_bytes(size); }

void* map(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void futex_wait(uint32_t* word, uint32_t expected, std::chrono::milliseconds at_most) {
  timespec ts{static_cast<time_t>(at_most.count() / 1000), static_cast<long>(at_most.count() % 1000) * 1000000};
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);  // shared: the word lives in another mapping too
}

void futex_wake_all(uint32_t* word) { syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

const std::string kPrefix = "neuron_check_board/";
constexpr int kPolls = 200;
constexpr std::chrono::milliseconds kCheckEvery(100);

} // namespace

std::unique_ptr<SignatureBoard> SignatureBoard::connect(c10d::Store& store, int rank, int size) {
  const size_t bytes = board_bytes(size);
  void* base = nullptr;
  std::string published;
  if (rank == 0) {
    uint64_t token = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    std::ostringstream name;
    name << "/torchneuron-check-" << getpid() << "-" << std::hex << token;
    int fd = shm_open(name.str().c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) {
      if (ftruncate(fd, static_cast<off_t>(bytes)) == 0) base = map(fd, bytes);
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
    store.set(kPrefix + "name", published);  // empty: this host cannot make a board, use gloo
  } else {
    published = store.get_to_str(kPrefix + "name");
    if (!published.empty()) {
      std::istringstream in(published);
      std::string name;
      uint64_t token = 0;
      in >> name >> token;
      int fd = shm_open(name.c_str(), O_RDWR, 0);  // fails on another host: the name is local to rank 0's
      if (fd >= 0) {
        base = map(fd, bytes);
        close(fd);
      }
      auto* h = static_cast<Header*>(base);
      if (base && (h->magic != kMagic || h->token != token || h->size != size)) {
        munmap(base, bytes);  // a board of that name, but not ours (another host's namespace)
        base = nullptr;
      }
    }
  }
  auto* processes = base ? reinterpret_cast<Process*>(static_cast<char*>(base) + kPidsOffset) : nullptr;
  if (base) processes[rank] = self();
  // Every rank reports whether it mapped the board, then whether it sees every
  // peer's process (same pid namespace): the board is used only if all did.
  auto report_and_agree = [&](const std::string& what, bool ok) {
    store.set(kPrefix + what + "/" + std::to_string(rank), ok ? "1" : "0");
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back(kPrefix + what + "/" + std::to_string(r));
    store.wait(keys);
    bool all = true;
    for (const auto& k : keys) all = all && store.get_to_str(k) == "1";
    return all;
  };
  bool all = report_and_agree("mapped", base != nullptr);
  if (all) {
    bool sees_all = true;
    for (int r = 0; r < size; ++r) sees_all = sees_all && alive(processes[r]);
    all = report_and_agree("visible", sees_all);
  }
  if (rank == 0 && !published.empty()) {
    shm_unlink(published.substr(0, published.find(' ')).c_str());  // all have mapped it: nothing to leak
  }
  if (!all) {
    if (base) munmap(base, bytes);
    return nullptr;
  }
  return std::unique_ptr<SignatureBoard>(new SignatureBoard(base, bytes, rank, size));
}

SignatureBoard::SignatureBoard(void* base, size_t bytes, int rank, int size)
    : base_(base), bytes_(bytes), rank_(rank), size_(size) {}

SignatureBoard::~SignatureBoard() { munmap(base_, bytes_); }

char* SignatureBoard::slot(uint32_t index) const {
  return static_cast<char*>(base_) + rows_offset(size_) + static_cast<size_t>(index % kSlots) * slot_bytes(size_);
}

std::string SignatureBoard::dead_peers() const {
  const auto* processes = reinterpret_cast<const Process*>(static_cast<const char*>(base_) + kPidsOffset);
  std::string dead;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && !alive(processes[r])) {
      dead += c10::str(dead.empty() ? "" : ", ", "rank ", r, " (pid ", processes[r].pid, ")");
    }
  }
  return dead;
}

// Sleeps on `word` (expected value `seen`) up to kCheckEvery; every kCheckEvery of waiting, throws if
// a peer died or the deadline passed.
void SignatureBoard::wait_or_throw(std::chrono::steady_clock::time_point start, std::chrono::milliseconds timeout,
                                   std::chrono::steady_clock::time_point& next_check) const {
  const auto t = std::chrono::steady_clock::now();
  if (t < next_check) return;
  next_check = t + kCheckEvery;
  if (auto dead = dead_peers(); !dead.empty()) {
    C10_THROW_ERROR(DistBackendError, c10::str(dead, " exited"));
  }
  if (t > start + timeout) {
    C10_THROW_ERROR(DistBackendError, c10::str("timed out after ", timeout.count(),
                                               " ms waiting for the other ranks (process group timeout)"));
  }
}

SignatureBoard::Round SignatureBoard::post(const int64_t* mine, int n_fields, std::chrono::milliseconds timeout) {
  TORCH_INTERNAL_ASSERT(n_fields <= kMaxFields);
  std::lock_guard<std::mutex> guard(mutex_);
  Round round;
  round.index = next_++;
  char* s = slot(round.index);
  const uint32_t use = round.index / kSlots;  // this slot's use count before this round
  // The slot's previous use must be over on every rank before its rows are overwritten. It almost
  // always is: that was kSlots collectives ago.
  if (use > 0) {
    auto* released = reinterpret_cast<uint32_t*>(s + released_offset());
    const auto start = std::chrono::steady_clock::now();
    auto next_check = start + kCheckEvery;
    for (int r = 0; r < size_; ++r) {
      std::atomic_ref<uint32_t> stamp(released[r]);
      while (static_cast<int32_t>(stamp.load(std::memory_order_acquire) - use) < 0) {
        usleep(200);
        wait_or_throw(start, timeout, next_check);
      }
    }
  }
  auto* rows = reinterpret_cast<int64_t*>(s + slot_rows_offset(size_));
  std::copy(mine, mine + n_fields, rows + static_cast<size_t>(rank_) * kMaxFields);
  // Claim the reference place if nobody posted this use yet. The row is written before (release), so
  // whoever reads `first` (acquire) can read the reference's row.
  auto* header = reinterpret_cast<Slot*>(s);
  std::atomic_ref<uint64_t> first(header->first);
  const uint64_t claim = (static_cast<uint64_t>(use + 1) << 32) | static_cast<uint32_t>(rank_);
  uint64_t seen = first.load(std::memory_order_acquire);
  while (static_cast<uint32_t>(seen >> 32) != use + 1 &&
         !first.compare_exchange_weak(seen, claim, std::memory_order_acq_rel, std::memory_order_acquire)) {
  }
  round.reference = static_cast<uint32_t>(seen >> 32) == use + 1 ? static_cast<int>(seen & 0xffffffffu) : rank_;
  const uint32_t target = static_cast<uint32_t>(size_) * (use + 1);
  if (std::atomic_ref<uint32_t>(header->arrived).fetch_add(1, std::memory_order_acq_rel) + 1 == target) {
    futex_wake_all(&header->arrived);  // the last to post wakes the ranks waiting for everyone
  }
  round.rows = rows;
  return round;
}

void SignatureBoard::wait_all(const Round& round, std::chrono::milliseconds timeout) {
  auto* header = reinterpret_cast<Slot*>(slot(round.index));
  std::atomic_ref<uint32_t> count(header->arrived);
  // Complete when the slot has seen all ranks post its use number `use` (wrap-safe comparison).
  const uint32_t target = static_cast<uint32_t>(size_) * (round.index / kSlots + 1);
  auto reached = [&](uint32_t now) { return static_cast<int32_t>(now - target) >= 0; };
  // A peer arriving within a microsecond or two is worth a short poll; after that, sleep on the word
  // (the last rank to post wakes the sleepers). Spinning longer (or polling with sched_yield) was
  // measured to cost more than it saves on a host with more ranks than CPUs: it takes the CPU from the
  // ranks that must arrive.
  const auto start = std::chrono::steady_clock::now();
  auto next_check = start + kCheckEvery;
  for (int polls = 0;; ++polls) {
    const uint32_t now = count.load(std::memory_order_acquire);
    if (reached(now)) break;
    if (polls < kPolls) continue;
    futex_wait(&header->arrived, now, kCheckEvery);  // returns early when another rank posts
    if (reached(count.load(std::memory_order_acquire))) break;
    wait_or_throw(start, timeout, next_check);
  }
}

void SignatureBoard::release(const Round& round) {
  char* s = slot(round.index);
  auto* released = reinterpret_cast<uint32_t*>(s + released_offset());
  std::atomic_ref<uint32_t>(released[rank_]).store(round.index / kSlots + 1, std::memory_order_release);
}

} // namespace neuron::distributed
