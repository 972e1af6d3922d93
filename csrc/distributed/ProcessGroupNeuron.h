// The c10d backend of the neuron device ("neuron" in init_process_group).
//
// NeuronCores exchange data over the Neuron collectives engine (NeuronLink
// between the cores of an instance, EFA between instances); the emulator keeps
// device memory in host RAM, so the collectives run on zero-copy CPU aliases of
// the device tensors (neuron::host_alias), over one of two data paths chosen
// once per group, the same on every rank:
//  * ranks of one host: shared memory (SharedMemoryCollectives.h), near the
//    host's memory-copy speed; TORCHNEURON_SHM_COLLECTIVES=0 turns it off;
//  * groups spanning hosts, and what the shared-memory path does not carry
//    (bool and complex reductions, recv from any source, send/recv of several
//    tensors at once): a host backend, gloo over TCP.
// Point-to-point messages between ranks of one host (send/recv: pipeline
// parallelism) go through shared memory too, checked (PointToPoint.h).
//
// As TorchNeuron's, the backend serves neuron tensors only (object collectives and
// barriers then run on neuron tensors); CPU tensors belong on a gloo group
// ("cpu:gloo,neuron:neuron"). It refuses, on every rank, the arguments
// TorchNeuron refuses (CollectiveArguments.h).
#pragma once

#include "distributed/CollectiveCheck.h"
#include "distributed/HostReduction.h"
#include "distributed/NeuronWork.h"
#include "distributed/PointToPoint.h"
#include "distributed/SharedMemoryCollectives.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace neuron::distributed {

constexpr const char* kBackendName = "neuron";

class ProcessGroupNeuron : public c10d::Backend {
 public:
  struct Options : c10d::Backend::Options {
    explicit Options(std::chrono::milliseconds timeout = kBackendDefaultTimeout)
        : c10d::Backend::Options(kBackendName, timeout) {}
  };

  // Creates the host backend of a (sub)group: (store, group rank, group size,
  // options). Supplied from Python, which builds ProcessGroupGloo exactly as
  // torch does for "gloo" (GLOO_SOCKET_IFNAME, lazy init); used again by split().
  using HostFactory = std::function<c10::intrusive_ptr<c10d::Backend>(
      const c10::intrusive_ptr<c10d::Store>&, int, int, const c10::intrusive_ptr<Options>&)>;

  // `store` is the group's: the ranks meet there once to share a SignatureBoard.
  ProcessGroupNeuron(c10::intrusive_ptr<c10d::Backend> host, c10::intrusive_ptr<Options> options,
                     HostFactory host_factory, const c10::intrusive_ptr<c10d::Store>& store);

  const std::string getBackendName() const override { return kBackendName; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override { return options_; }
  const c10::intrusive_ptr<c10d::Backend>& host() const { return host_; }
  // How the pre-collective check runs: "shared memory", "network" (through the host backend) or "off".
  std::string check_transport() const;
  // Which path moves the data of the collectives it carries: "shared memory (...)" or "gloo".
  std::string data_transport() const {
    if (!shm_) return "gloo";
    if (shm_->maps_peer_memory()) return "shared memory (peer device memory)";
    return shm_->reads_peers_directly() ? "shared memory (direct reads)" : "shared memory (staging)";
  }

  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;

  void setTimeout(std::chrono::milliseconds timeout) override;
  void setGroupUid(const std::string& pg_uid) override;
  void abort() override { host_->abort(); }
  void shutdown() override { host_->shutdown(); }
  // Collectives issued on this group so far, the same count on every rank (TorchNeuron numbers its
  // works from 0 per group); each work's getSequencenumber() is its place in that count.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  void enableCollectivesTiming() override { host_->enableCollectivesTiming(); }
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override {
    host_->monitoredBarrier(opts, wait_all_ranks);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  struct Call;
  struct Issued;
  // The one body of every collective: check the devices, agree, then either run it
  // on shared memory (`on_shm()`, when set: complete when it returns) or issue it on
  // the host (`on_host() -> Issued`) and wrap. Defined and used in ProcessGroupNeuron.cpp.
  template <typename OnHost>
  c10::intrusive_ptr<c10d::Work> collective(Call call, const std::function<void()>& on_shm, OnHost&& on_host);
  std::string describe(const char* name, const at::Tensor& example) const;
  // The shared-memory bodies several collectives share (defined next to them).
  std::function<void()> all_reduce_on_shm(std::vector<at::Tensor>& tensors, const HostReduction& plan);
  void all_gather_on_shm(const at::Tensor& input, const std::vector<at::Tensor>& outputs);
  void all_gather_into_on_shm(const at::Tensor& output, const at::Tensor& input, const char* name);
  void reduce_scatter_on_shm(const at::Tensor& output, const std::vector<at::Tensor>& chunks,
                             const HostReduction& plan);
  void exchange_on_shm(const std::vector<at::Tensor>& send, const std::vector<at::Tensor>& recv);
  // `whole` (contiguous, size_ x `part`'s elements) as size_ views of `part`'s size.
  std::vector<at::Tensor> rank_slices(const at::Tensor& whole, const at::Tensor& part, const char* name) const;

  // Raises on every rank if the ranks are not all running this collective (CollectiveCheck.h).
  // Returns null, or for a collective that starts before every rank posted, the
  // check to run once it completed (it throws on a disagreement).
  std::function<void()> agree(const CollectiveSignature& signature);
  // Raises the call's refusal on every rank of the group (see the definition).
  [[noreturn]] void refuse(const Call& call);
  // Runs `reference` on zero-filled buffers: what a rank that disagrees with a
  // reference that started already does, so that the reference's collective completes.
  void stand_in(const CollectiveSignature& reference);
  c10::intrusive_ptr<c10d::Work> wrap(c10::intrusive_ptr<c10d::Work> host_work, std::vector<at::Tensor> outputs,
                                      std::function<void()> finish, c10d::OpType op, const char* name,
                                      const at::Tensor& example, uint64_t seq) const;

  c10::intrusive_ptr<c10d::Backend> host_;
  c10::intrusive_ptr<Options> options_;
  HostFactory host_factory_;
  std::shared_ptr<SignatureBoard> board_;  // null: checks off, or through the host backend
  std::unique_ptr<SharedMemoryCollectives> shm_;  // null: the data goes through the host backend
  std::atomic<uint64_t> seq_{0};  // collectives issued (getSequenceNumberForGroup)
  std::shared_ptr<SharedMemoryPointToPoint> p2p_;  // null: send/recv go through the host backend

  // ProcessGroup::splitGroup (torch 2.13) calls split() once per device type
  // this backend serves (neuron and cpu), with the same store: the second call
  // must return the first child, or two host backends would rendezvous on the
  // same store keys and collide.
  std::mutex split_mutex_;
  std::string last_split_key_;
  c10::weak_intrusive_ptr<c10d::Backend> last_split_{c10::intrusive_ptr<c10d::Backend>()};
};

} // namespace neuron::distributed
