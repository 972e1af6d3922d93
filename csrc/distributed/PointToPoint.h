// Point-to-point messages (send/recv, what pipeline parallelism moves between its stages) between the ranks of a
// group on one host, checked as the collectives are: a send and the recv it meets must agree on shape and dtype,
// or both ranks raise an error naming both (nothing is copied, the group stays usable); a peer that exits or
// never arrives is an error within the process-group timeout. Through gloo the first is an abort of the receiving
// process (a larger message than its buffer: gloo's enforce, in its I/O thread) or silently wrong data (a smaller
// or same-sized one), which is why ranks of one host do not use gloo for point-to-point.
//
// Matching: the n-th send of rank s to rank d meets the n-th recv of rank d from rank s, as with NCCL (tags are
// not used to match; recv from any source stays on gloo). Each ordered pair of ranks has a ring of kSlots
// message slots in a segment the group's ranks map (SharedSegment); message n uses slot n % kSlots. Each side
// posts its end of the message there (its process, the address of its bytes, their shape and dtype) and marks
// the slot; whichever side comes second compares both ends and moves the bytes between the two processes'
// memory itself (process_vm_readv by a receiver, process_vm_writev by a sender: the probe of the shared-memory
// collectives, SharedMemoryCollectives::reads_peers_directly, says the ranks may), then marks the slot done.
// The side that came first finds its message done (or refused) in wait(). So neither call blocks on the peer and
// every wait depends only on the peer having made its call, as with gloo: exchanges that post both directions
// before waiting (batch_isend_irecv) cannot deadlock. The first side's bytes are held (its tensor and, under
// TORCHNEURON_STRICT_MEMORY=1, their open host access) until the message is done, even if its work is dropped
// unwaited. At most kSlots messages per pair are in the slots: a later one is queued in its process and posted by
// the rank's next point-to-point call or wait that finds its slot free; so no call ever blocks (but a peer waiting
// on a queued message waits for this rank's next such call, where gloo would have sent it already).
#pragma once

#include "distributed/SharedSegment.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace neuron::distributed {

class SharedMemoryPointToPoint : public std::enable_shared_from_this<SharedMemoryPointToPoint> {
 public:
  static constexpr uint32_t kSlots = 16;  // message slots per ordered pair of ranks

  // Collective over the group's store: every rank calls it. Null on every rank when the ranks cannot map one
  // segment (then point-to-point goes through the host backend).
  static std::shared_ptr<SharedMemoryPointToPoint> connect(c10d::Store& store, int rank, int size,
                                                           std::chrono::milliseconds timeout);
  ~SharedMemoryPointToPoint();

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  // `call` names the call in errors ("send on rank 0 of 2 (Float[8] on neuron:0)"). The tensor is a neuron or a
  // CPU tensor; its bytes are read (send) or written (recv) before the returned work completes.
  c10::intrusive_ptr<c10d::Work> send(const at::Tensor& tensor, int dst, std::string call);
  c10::intrusive_ptr<c10d::Work> recv(const at::Tensor& tensor, int src, std::string call);

  struct Message;  // one side's part in one message (PointToPoint.cpp)

 private:
  SharedMemoryPointToPoint(std::unique_ptr<SharedSegment> segment, int rank, int size,
                           std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> post(const at::Tensor& tensor, int peer, bool sending, std::string call);
  // Posts this rank's end of the message if its slot is free (else false): completes it if the peer's end is
  // there (this rank came second), else it waits for the peer.
  bool try_post(const std::shared_ptr<Message>& m);
  // Moves every message on that can move without waiting: finishes those this rank came first to that the peer
  // completed (releasing their slots, whether or not their work is still held or was waited for), then posts the
  // queued ones whose slot is free. Every call and every wait runs it first.
  void progress();

  friend class PointToPointWork;
  std::unique_ptr<SharedSegment> segment_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  bool cpu_per_rank_;  // a waiting rank polls longer before it sleeps (has_cpu_per_rank)
  std::mutex mutex_;
  std::vector<uint64_t> sent_, received_;  // messages posted to / from each peer
  std::vector<std::shared_ptr<Message>> waiting_;  // messages this rank came first to, until they are finished
  std::vector<std::shared_ptr<Message>> queued_;   // messages whose slot was still busy: posted by progress()
};

} // namespace neuron::distributed
