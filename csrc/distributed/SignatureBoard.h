// Where the ranks of a group on one host post the signature of each collective
// before running it (CollectiveCheck.h), in shared memory.
//
// Posting through gloo costs a small all-gather per collective: several
// thread hand-offs and socket round trips, a fixed latency that is a large
// share of a 1-16 MiB collective on a busy host. Ranks that share a host
// instead write their signature into a shared-memory board: one store and one
// atomic add per rank. The first rank to post a collective is its reference;
// CollectiveCheck.h decides from it whether to wait for the others. Groups that span hosts (or hosts without /dev/shm) use
// gloo; every rank of a group agrees on which at creation.
#pragma once

#include "distributed/SharedSegment.h"

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

  // One collective's place on the board.
  struct Round {
    uint32_t index = 0;          // collectives this rank posted before this one
    int reference = -1;          // the rank that posted first: the others compare with its signature
    const int64_t* rows = nullptr;  // size x kMaxFields, rank-major; a rank's row is valid once it posted
  };

  // Posts this rank's fields for its next collective and returns at once (it
  // waits only in the rare case that a peer is still checking the collective
  // that used the same slot kSlots collectives ago). The reference's row is
  // readable when this returns.
  Round post(const int64_t* mine, int n_fields, std::chrono::milliseconds timeout);
  // Waits until every rank has posted this round. Throws c10::DistBackendError
  // when a peer process exits or `timeout` passes first.
  void wait_all(const Round& round, std::chrono::milliseconds timeout);
  // This rank is done with the round's rows: the slot may be reused.
  void release(const Round& round);

 private:
  SignatureBoard(std::unique_ptr<SharedSegment> segment, int rank, int size);
  char* slot(uint32_t index) const;

  std::unique_ptr<SharedSegment> segment_;
  int rank_;
  int size_;
  bool cpu_per_rank_;  // whether a waiting rank polls before it sleeps (SharedSegment::wait_arrivals)
  uint32_t next_ = 0;  // collectives this rank has posted
  std::mutex mutex_;
};

} // namespace neuron::distributed
