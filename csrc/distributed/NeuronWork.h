// The handle (c10d::Work) of a collective issued on the neuron backend.
//
// The collective itself runs in the host backend over zero-copy aliases of the
// device tensors. This handle wraps the host's handle so that callers see their
// own tensors (result() and getFuture() yield neuron tensors, as DDP's comm
// hooks expect), so that a step the host cannot do itself (HostReduction's
// integer division) has run before anyone can observe completion, and so that
// a failure names the collective, the rank and the usual causes.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace neuron::distributed {

class NeuronWork : public c10d::Work {
 public:
  // `finish` runs on the host's completion thread after a successful host
  // collective and before the work reports completion; `describe` is the
  // context prefixed to errors ("all_reduce on rank 1 of 4, float[1024]").
  NeuronWork(c10::intrusive_ptr<c10d::Work> host, std::vector<at::Tensor> outputs, std::function<void()> finish,
             c10d::OpType op, int rank, std::string describe, uint64_t seq);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void abort() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override;
  float getDuration() const override;

 private:
  [[noreturn]] void rethrow(std::exception_ptr error) const;

  // Runs `finish` and completes the future once, from whichever thread sees the
  // host's completion first: the host's callback thread, or a thread in wait()
  // (which then does not have to be woken a second time by that callback).
  struct Completion {
    std::once_flag once;
    c10::intrusive_ptr<c10::ivalue::Future> future;
    std::vector<at::Tensor> outputs;
    std::function<void()> finish;
    void run(std::exception_ptr host_error);
  };

  c10::intrusive_ptr<c10d::Work> host_;
  std::vector<at::Tensor> outputs_;
  // Completed with `outputs_` once the host is done and `finish` has run; null
  // when the host work has no future (gloo's send/recv), then `finish` runs in wait().
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<Completion> completion_;
  std::function<void()> finish_;
  std::once_flag finished_;
  std::string describe_;
  uint64_t seq_;
};

// The handle of a collective that was complete when its call returned (the shared-memory data
// path runs in the calling thread): done, successful, its future completed with the caller's tensors.
class CompletedWork : public c10d::Work {
 public:
  CompletedWork(std::vector<at::Tensor> outputs, c10d::OpType op, int rank, uint64_t seq);

  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  std::vector<at::Tensor> result() override { return outputs_; }
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override { return true; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  uint64_t getSequencenumber() const override { return seq_; }

 private:
  uint64_t seq_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

} // namespace neuron::distributed
