#include "distributed/NeuronWork.h"

#include "core/Device.h"
#include "distributed/CollectiveError.h"

#include <algorithm>

namespace neuron::distributed {
namespace {

std::vector<c10::Device> neuron_devices_of(const std::vector<at::Tensor>& tensors) {
  std::vector<c10::Device> devices;
  for (const auto& t : tensors) {
    if (t.defined() && t.device().type() == kNeuron &&
        std::find(devices.begin(), devices.end(), t.device()) == devices.end()) {
      devices.push_back(t.device());
    }
  }
  return devices;
}

// The type of what the futures yield (a list of tensors): made once, not per collective.
const c10::TypePtr& tensor_list_type() {
  static const c10::TypePtr type = c10::ListType::create(c10::TensorType::get());
  return type;
}

} // namespace

NeuronWork::NeuronWork(c10::intrusive_ptr<c10d::Work> host, std::vector<at::Tensor> outputs,
                       std::function<void()> finish, c10d::OpType op, int rank, std::string describe, uint64_t seq)
    : c10d::Work(rank, op),  // no profiling title: the host work already records the collective
      host_(std::move(host)),
      outputs_(std::move(outputs)),
      finish_(std::move(finish)),
      describe_(std::move(describe)),
      seq_(seq) {
  c10::intrusive_ptr<c10::ivalue::Future> host_future;
  try {
    host_future = host_->getFuture();
  } catch (const c10::Error&) {
    return;  // gloo's send/recv have no future: wait() drives completion
  }
  if (!host_future) return;
  // A future over the device tensors, completed from the host's future. The
  // callback owns what it needs (not `this`): the caller may drop this handle
  // of an async collective long before the host finishes.
  future_ = c10::make_intrusive<c10::ivalue::Future>(tensor_list_type(),
                                                     neuron_devices_of(outputs_));
  // The callback owns what it needs (not `this`): the caller may drop this
  // handle of an async collective long before the host finishes.
  completion_ = std::make_shared<Completion>();
  completion_->future = future_;
  completion_->outputs = outputs_;
  completion_->finish = std::move(finish_);
  finish_ = nullptr;
  host_future->addCallback([completion = completion_](c10::ivalue::Future& done) {
    completion->run(done.hasError() ? done.exception_ptr() : nullptr);
  });
}

void NeuronWork::Completion::run(std::exception_ptr host_error) {
  std::call_once(once, [&] {
    if (host_error) {
      future->setError(host_error);
      return;
    }
    try {
      if (finish) finish();
    } catch (...) {
      future->setError(std::current_exception());
      return;
    }
    future->markCompleted(c10::IValue(outputs));
  });
}

bool NeuronWork::isCompleted() {
  return future_ ? future_->completed() : host_->isCompleted();
}

bool NeuronWork::isSuccess() const {
  return future_ ? future_->completed() && !future_->hasError() : host_->isSuccess();
}

std::exception_ptr NeuronWork::exception() const {
  if (future_ && future_->hasError()) return future_->exception_ptr();
  return host_->exception();
}

int NeuronWork::sourceRank() const { return host_->sourceRank(); }

std::vector<at::Tensor> NeuronWork::result() { return outputs_; }

void NeuronWork::synchronize() { host_->synchronize(); }

void NeuronWork::rethrow(std::exception_ptr error) const {
  raise_collective_failure(describe_, message_of(error));
}

bool NeuronWork::wait(std::chrono::milliseconds timeout) {
  bool done = false;
  try {
    done = host_->wait(timeout);
  } catch (...) {
    rethrow(std::current_exception());
  }
  if (future_) {
    if (done) completion_->run(nullptr);  // the host succeeded: complete here rather than wait to be woken
    future_->wait();
    if (future_->hasError()) rethrow(future_->exception_ptr());
  } else if (done && finish_) {
    std::call_once(finished_, finish_);
  }
  return done;
}

void NeuronWork::abort() { host_->abort(); }

c10::intrusive_ptr<c10::ivalue::Future> NeuronWork::getFuture() {
  TORCH_CHECK(future_, "neuron backend: ", describe_, " has no future (point-to-point work); call wait()");
  return future_;
}

CompletedWork::CompletedWork(std::vector<at::Tensor> outputs, c10d::OpType op, int rank, uint64_t seq)
    : c10d::Work(rank, op), seq_(seq), outputs_(std::move(outputs)) {
  future_ = c10::make_intrusive<c10::ivalue::Future>(tensor_list_type(),
                                                     neuron_devices_of(outputs_));
  future_->markCompleted(c10::IValue(outputs_));
  finish();
}

uint64_t NeuronWork::getSequencenumber() const { return seq_; }

float NeuronWork::getDuration() const { return host_->getDuration(); }

} // namespace neuron::distributed
