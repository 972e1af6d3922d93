// The device memory of the other ranks of a host, mapped into this process: what lets a collective
// reduce straight from the peers' tensors instead of copying them into a staging area first, as the
// cores of an instance read each other's HBM over NeuronLink.
//
// The runtime of each rank keeps its device memory in a shared arena (rt::share_device_memory: a
// memfd). connect() makes this rank's arena, publishes (pid, fd, size) through the group's store, maps
// every peer's read-only through /proc/<pid>/fd/<fd> (the kernel allows it to the same user, under the
// ptrace read check) and agrees with the peers: a PeerMemory on every rank, or null on every rank
// (strict memory mode, no memfd, or a peer that cannot be mapped). Mappings of a peer are shared by
// the groups of this process that use them, and dropped with the last.
//
// Tensors in the arena: allocations of rt::kSharedMinBytes and more made after the group's creation.
// Others (small ones, older ones, host kernels' outputs adopted as device memory) are not: the
// collective then takes the staging path (SharedMemoryCollectives decides, on every rank alike).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace neuron::distributed {

class PeerMemory {
 public:
  static std::unique_ptr<PeerMemory> connect(c10d::Store& store, int rank, int size);

  // Where [p, p + bytes) lies in this rank's arena, plus one; 0 when it is not (all of it) there.
  uint64_t locate(const void* p, int64_t bytes) const;
  // Rank q's device memory at a location locate() gave on rank q (this rank's own memory for q == rank).
  const char* at(int q, uint64_t location) const { return bases_[q] + (location - 1); }

  struct Mapping;

 private:
  PeerMemory() = default;
  std::vector<std::shared_ptr<Mapping>> mappings_;  // per rank (null for this rank)
  std::vector<const char*> bases_;                   // per rank
  const char* own_ = nullptr;
  uint64_t own_bytes_ = 0;
};

} // namespace neuron::distributed
