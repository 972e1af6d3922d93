// The data path between the ranks of a group on one host: collectives through
// a shared-memory staging segment, what NeuronLink is to a real instance.
//
// Each rank's device memory lives in its own process, so the ranks meet in a
// segment they all map (SharedSegment): two buffers of one slot per rank. A
// collective moves its data in pieces of at most a slot per rank:
//  * all_reduce: every rank copies the chunks of its piece that others reduce
//    into its slot; barrier; rank r reduces chunk r reading every rank's slot
//    (its own data in place), in rank order (RankOrderReduction.h), and
//    publishes it in its slot; barrier; every rank copies the others' reduced
//    chunks out (a reduce-scatter, then an all-gather, by chunks); up to 64 KiB,
//    every rank copies all its data in, barrier, every rank reduces all of it
//    (one barrier instead of two: what latency is made of);
//  * reduce_scatter: the same without the all-gather; reduce: only the root
//    copies out; all_gather: copy in, barrier, copy out; broadcast: the root
//    copies in, barrier, the others copy out; all_to_all, gather, scatter:
//    sub-slots per destination, in rounds.
// Pieces alternate between the two buffers, so one barrier per piece suffices
// where a piece only copies in and out: before a rank writes a buffer again,
// every rank passed a barrier after its last read of it.
//
// Synchronization: one barrier counter in the segment (a futex word; every
// rank runs the same sequence of collectives on a group, so the n-th barrier
// is complete when the counter reaches n x size). A waiting rank polls briefly
// (when the group has no more ranks than the host has CPUs) and then sleeps on
// the futex, which the last rank to arrive wakes: with more ranks than CPUs,
// spinning would take the CPU from the ranks being waited for. Every 100 ms of
// waiting it checks the peers' processes and the group's timeout, and throws
// c10::DistBackendError naming the dead rank or the timeout; the transport is
// then broken and every later call throws at once (as an aborted NCCL
// communicator), so no rank ever waits on a barrier count that cannot come.
//
// Every call is collective: all ranks of the group make the same calls with
// the same sizes (the pre-collective check, CollectiveCheck.h, makes sure).
// Pointers are host memory, contiguous; calls from several threads of a rank
// are serialized.
#pragma once

#include "distributed/PeerMemory.h"
#include "distributed/SharedSegment.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace neuron::distributed {

class SharedMemoryCollectives {
 public:
  // Collective over the group's store: a transport on every rank, or null on every rank when the
  // ranks are not all on one host (or cannot share memory).
  static std::unique_ptr<SharedMemoryCollectives> connect(c10d::Store& store, int rank, int size,
                                                          std::chrono::milliseconds timeout);
  // Whether TORCHNEURON_SHM_COLLECTIVES allows this path (read at each group's creation; "0" turns it off).
  static bool enabled();

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  // Whether large all_gather and broadcast read the peers' memory directly (else through the slots).
  bool reads_peers_directly() const { return direct_; }
  // Whether the ranks map each other's device memory (PeerMemory): collectives on tensors in it
  // reduce and copy straight from the peers' tensors.
  bool maps_peer_memory() const { return peers_ != nullptr; }

  void barrier();
  // Throws if an earlier call failed (the group is then unusable), as every other call does first.
  void check_usable() const;
  // In place: every rank's `data` becomes the reduction of all ranks' (root < 0), or only the root's (reduce).
  void all_reduce(void* data, int64_t count, at::ScalarType dtype, c10d::ReduceOp::RedOpType op, int root = -1);
  // out (count elements) = reduction over ranks of their chunks[this rank] (each rank passes `size` chunks).
  void reduce_scatter(void* out, const std::vector<const void*>& chunks, int64_t count, at::ScalarType dtype,
                      c10d::ReduceOp::RedOpType op);
  // outs[q] (bytes) = rank q's input.
  void all_gather(const std::vector<void*>& outs, const void* in, int64_t bytes);
  void broadcast(void* data, int64_t bytes, int root);
  // Rank r sends send_bytes[q] bytes from send[q] to rank q, and receives recv_bytes[q] bytes from
  // rank q into recv[q] (all_to_all, gather, scatter). Sizes may differ by pair and be 0.
  void exchange(const std::vector<const void*>& send, const std::vector<int64_t>& send_bytes,
                const std::vector<void*>& recv, const std::vector<int64_t>& recv_bytes);

 private:
  SharedMemoryCollectives(std::unique_ptr<SharedSegment> segment, int rank, int size, size_t slot_bytes,
                          std::chrono::milliseconds timeout);
  char* slot(int buffer, int rank) const;
  // The address rank `rank` publishes for the current collective (its tensor, for direct reads).
  uint64_t& published(int rank) const;
  // Collective: publishes `mine`, where this rank's data lies in its device memory that the peers map
  // (PeerMemory::locate; 0 when it is not there or this rank offers none), meets the others (a barrier)
  // and returns every rank's location (the same on every rank).
  std::vector<uint64_t> locate_all(uint64_t mine);
  // dst (count elements of this rank's memory; may be srcs[rank_]) = the rank-order reduction of srcs.
  void reduce_into(char* dst, const std::vector<const char*>& srcs, int64_t count, at::ScalarType dtype,
                   c10d::ReduceOp::RedOpType op);
  bool peers_readable(c10d::Store& store);
  // Copies `bytes` at address `from` of rank q's process to `to` (process_vm_readv).
  void read_peer(int q, void* to, uint64_t from, int64_t bytes);
  int next_buffer() { return static_cast<int>(pieces_++ & 1); }
  void wait_barrier();  // a barrier, without the lock and broken checks of barrier()
  template <typename F>
  void guarded(F&& body);

  std::unique_ptr<SharedSegment> segment_;
  std::unique_ptr<PeerMemory> peers_;  // null: the ranks cannot read each other's device memory
  int rank_, size_;
  size_t slot_bytes_;
  std::chrono::milliseconds timeout_;
  bool spin_;              // poll before sleeping: the group has no more ranks than the host has CPUs
  bool direct_ = false;    // every rank can read every peer's memory (peers_readable)
  uint32_t barriers_ = 0;  // barriers this rank passed on the group
  uint64_t pieces_ = 0;    // pieces moved: which buffer the next one uses
  std::string broken_;     // why an earlier call failed: the group is unusable
  std::mutex mutex_;
};

} // namespace neuron::distributed
