// Where the ranks of a group on one host post the signature of each collective
// before running it (CollectiveCheck.h), in shared memory.
//
// Posting through gloo costs a small all-gather per collective: several
// thread hand-offs and socket round trips, a fixed latency that is a large
// share of a 1-16 MiB collective on a busy host. Ranks that share a host
// instead write their signature into a shared-memory board and wait on one
// futex until all have written: one atomic add per rank and, for the last to
// arrive, one wake-up. Groups that span hosts (or hosts without /dev/shm) use
// gloo; every rank of a group agrees on which at creation.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace neuron::distributed {

class SignatureBoard {
 public:
  static constexpr int kMaxFields = 16;  // int64 fields per rank and collective

  // Collective over `store`: every rank of the group calls it. Returns a board
  // on every rank, or null on every rank when they cannot all map one.
  static std::unique_ptr<SignatureBoard> connect(c10d::Store& store, int rank, int size);
  ~SignatureBoard();

  // Posts this rank's fields for the next collective and waits until every
  // rank has posted its own; returns all rows (size x kMaxFields, rank-major),
  // valid until the next call. Throws c10::DistBackendError when a peer process
  // exits or `timeout` passes first.
  const int64_t* exchange(const int64_t* mine, int n_fields, std::chrono::milliseconds timeout);

 private:
  SignatureBoard(void* base, size_t bytes, int rank, int size);
  uint32_t* arrived() const;
  int64_t* rows(uint32_t slot) const;
  std::string dead_peers() const;

  void* base_;
  size_t bytes_;
  int rank_;
  int size_;
  uint32_t next_ = 0;  // collectives this rank has posted
  std::mutex mutex_;
};

} // namespace neuron::distributed
