// A shared-memory segment mapped by every rank of a group on one host, and the
// liveness of those ranks' processes.
//
// Rank 0 creates it (shm_open of a name unique to its process and a random
// token), publishes the name through the group's store, every rank maps it,
// and rank 0 unlinks the name once all have mapped it: nothing is left in
// /dev/shm when the job ends, however it ends. (A crash during connect() may
// leave a name behind; it never collides with a later job's, and the next
// connect() on the host removes it once its creator is gone.)
//
// The ranks use the segment only if all of them mapped the same one, run on
// the same host (hostname, compared through the store) and see each other's
// processes (same pid namespace: a waiting rank notices a dead peer by its
// pid): connect() returns a segment on every rank or null on every rank.
// Users: SignatureBoard (the pre-collective check) and SharedMemoryCollectives
// (the data path).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace neuron::distributed {

class SharedSegment {
 public:
  // Collective over `store`: every rank of the group calls it with the same
  // `kind` (a short word naming the user, in the segment's name and store keys)
  // and `bytes`. The bytes are zero-filled and committed (a host whose
  // /dev/shm is too small fails here, not with SIGBUS later).
  static std::unique_ptr<SharedSegment> connect(c10d::Store& store, const std::string& kind, int rank, int size,
                                                size_t bytes);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  char* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // The process of a rank of the group (its pid).
  int64_t pid(int rank) const;
  // The peers whose process has exited: "rank 1 (pid 123), rank 3 (pid 456)", or "".
  std::string dead_peers() const;

  // What a rank waiting on its peers (in a loop of sleeps of at most kCheckEvery) calls after each
  // sleep: from `start` on, every kCheckEvery (reading /proc costs), throws c10::DistBackendError if a
  // peer's process exited ("rank 1 (pid 123) exited (noticed in shared memory)") or `timeout` passed.
  static constexpr std::chrono::milliseconds kCheckEvery{100};
  void throw_if_peers_lost(std::chrono::steady_clock::time_point start, std::chrono::milliseconds timeout,
                           std::chrono::steady_clock::time_point& next_check) const;

  // A meeting of the ranks on two words of this segment: `arrived` (a futex word) counts the arrivals
  // of all meetings on it together (wraps), `sleepers` the ranks asleep on it.
  // arrive(): counts this rank in; the arrival that brings the count to `target` wakes the sleepers,
  // only if there are any (a system call saved on most meetings), and returns true.
  static bool arrive(uint32_t* arrived, uint32_t* sleepers, uint32_t target);
  // Returns once `arrived` has reached `target` (wrap-safe): polls briefly (`cpu_per_rank`: longer), then sleeps
  // on the word registered in `sleepers`, checking every kCheckEvery that no peer was lost and that
  // `timeout` has not passed (throw_if_peers_lost).
  void wait_arrivals(uint32_t* arrived, uint32_t* sleepers, uint32_t target, bool cpu_per_rank,
                     std::chrono::milliseconds timeout) const;

 private:
  SharedSegment(void* base, size_t mapped, size_t header, int rank, int size);

  void* base_;
  size_t mapped_;
  char* data_;
  size_t bytes_;
  int rank_;
  int size_;
};

// Whether a group of `size` ranks has a CPU of this process's affinity per rank: then a rank waiting
// for its peers polls briefly before it sleeps (SharedSegment::wait_arrivals).
bool has_cpu_per_rank(int size);

// Sleeps while the 32-bit word (in a shared segment: other processes wake it) holds `expected`, at
// most `at_most`; returns early when woken or when the word changed. Wakes every sleeper of the word.
void futex_wait_shared(uint32_t* word, uint32_t expected, std::chrono::milliseconds at_most);
void futex_wake_all_shared(uint32_t* word);

// One spin of a polling loop: tells the CPU this is a wait (a sibling hyperthread gets the core).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

} // namespace neuron::distributed
