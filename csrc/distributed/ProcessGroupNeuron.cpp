#include "distributed/ProcessGroupNeuron.h"

#include "core/Device.h"
#include "core/HostBridge.h"
#include "distributed/CollectiveCheck.h"
#include "distributed/HostReduction.h"

#include <algorithm>
#include <optional>

namespace neuron::distributed {
namespace {

using c10d::OpType;
using c10d::Work;
using TensorList = std::vector<at::Tensor>;
using TensorLists = std::vector<TensorList>;

bool is_neuron(const at::Tensor& t) { return t.defined() && t.device().type() == kNeuron; }

// The host backend's view of the caller's tensors: a neuron tensor becomes a
// CPU alias of the same memory, a CPU tensor stays as it is.
at::Tensor on_host(const at::Tensor& t) { return is_neuron(t) ? host_alias(t) : t; }

TensorList on_host(const TensorList& ts) {
  TensorList out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(on_host(t));
  return out;
}

TensorLists on_host(const TensorLists& lists) {
  TensorLists out;
  out.reserve(lists.size());
  for (const auto& l : lists) out.push_back(on_host(l));
  return out;
}

TensorList flatten(const TensorLists& lists) {
  TensorList out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

// One call's tensors must all be neuron or all CPU, as with NCCL (all CUDA): a
// mix is almost always a forgotten .to(device), and gloo would accept it silently.
void check_devices(const char* name, const TensorList& tensors) {
  bool neuron = false, cpu = false;
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    auto type = t.device().type();
    TORCH_CHECK(type == kNeuron || type == c10::DeviceType::CPU, "neuron backend: ", name,
                " takes neuron or CPU tensors, got a tensor on ", t.device());
    (type == kNeuron ? neuron : cpu) = true;
  }
  TORCH_CHECK(!(neuron && cpu), "neuron backend: ", name,
              " got both neuron and CPU tensors; move them to one device (e.g. .to('neuron'))");
}

TensorList both(const TensorList& a, const TensorList& b) {
  TensorList out(a);
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

const at::Tensor& first(const TensorList& ts, const char* name) {
  TORCH_CHECK(!ts.empty() && ts[0].defined(), "neuron backend: ", name, " needs at least one tensor");
  return ts[0];
}

int64_t numel_of(const TensorList& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += t.defined() ? t.numel() : 0;
  return n;
}

using Sig = CollectiveSignature;

std::function<void()> finisher(const HostReduction& plan, TensorList host_outputs) {
  if (!plan.needs_finish()) return nullptr;
  return [plan, host_outputs = std::move(host_outputs)] { plan.finish(host_outputs); };
}

// The finish step of a work: first the check of a collective that started before every rank posted
// (it throws on a disagreement), then the host reduction's step.
std::function<void()> then(std::function<void()> verify, std::function<void()> finish) {
  if (!verify) return finish;
  if (!finish) return verify;
  return [verify = std::move(verify), finish = std::move(finish)] {
    verify();
    finish();
  };
}

// Issues a collective that may have started before every rank posted: if issuing it throws, the
// check still runs (it releases the board's slot), and the issuing error is the one raised.
template <typename F>
auto issue(const std::function<void()>& verify, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (...) {
    if (verify) {
      try {
        verify();
      } catch (...) {
      }
    }
    throw;
  }
}

} // namespace

ProcessGroupNeuron::ProcessGroupNeuron(c10::intrusive_ptr<c10d::Backend> host, c10::intrusive_ptr<Options> options,
                                       HostFactory host_factory, const c10::intrusive_ptr<c10d::Store>& store)
    : c10d::Backend(host->getRank(), host->getSize()),
      host_(std::move(host)),
      options_(std::move(options)),
      host_factory_(std::move(host_factory)) {
  if (collective_check_mode() == CheckMode::kAuto && size_ > 1) {
    board_ = SignatureBoard::connect(*store, rank_, size_);
  }
  init();
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::wrap(c10::intrusive_ptr<Work> host_work, TensorList outputs,
                                                  std::function<void()> finish, OpType op, const char* name,
                                                  const at::Tensor& example) const {
  std::string describe = c10::str(name, " on rank ", rank_, " of ", size_);
  if (example.defined()) {
    describe += c10::str(" (", example.scalar_type(), example.sizes(), " on ", example.device(), ")");
  }
  return c10::make_intrusive<NeuronWork>(std::move(host_work), std::move(outputs), std::move(finish), op, rank_,
                                         std::move(describe));
}

std::string ProcessGroupNeuron::check_transport() const {
  if (collective_check_mode() == CheckMode::kOff) return "off";
  return board_ ? "shared memory" : "network";
}

std::function<void()> ProcessGroupNeuron::agree(const CollectiveSignature& signature) {
  const auto mode = collective_check_mode();
  if (mode == CheckMode::kOff || size_ == 1) return nullptr;
  if (!board_) {
    check_same_collective(*host_, signature, pg_uid_);
    return nullptr;
  }
  auto check = std::make_shared<BoardCheck>(board_, signature, options_->timeout, rank_, size_, pg_uid_);
  if (check->start_now()) return [check] { check->finish(); };
  if (const auto* reference = check->stand_in()) {
    try {
      stand_in(*reference);
    } catch (const std::exception&) {
      // finish() raises the disagreement, the error that explains this one
    }
  }
  check->finish();  // throws, after a stand-in always
  return nullptr;
}

void ProcessGroupNeuron::stand_in(const CollectiveSignature& reference) {
  auto dtype = static_cast<at::ScalarType>(reference.dtype);
  auto zeros = [&](int64_t n) { return at::zeros({n}, at::TensorOptions().dtype(dtype)); };
  const int64_t n = reference.example_numel;
  switch (reference.op) {
    case OpType::ALLREDUCE: {
      TensorList t{zeros(n)};
      host_->allreduce(t, c10d::AllreduceOptions())->wait();
      break;
    }
    case OpType::_ALLGATHER_BASE: {
      auto in = zeros(n), out = zeros(n * size_);
      host_->_allgather_base(out, in, c10d::AllgatherOptions())->wait();
      break;
    }
    case OpType::_REDUCE_SCATTER_BASE: {
      auto out = zeros(n), in = zeros(n * size_);
      host_->_reduce_scatter_base(out, in, c10d::ReduceScatterOptions())->wait();
      break;
    }
    default:
      TORCH_INTERNAL_ASSERT(false, "neuron backend: no stand-in for ", reference.describe());
  }
}

// ---- collectives -----------------------------------------------------------
//
// Every collective goes through collective(): it checks the devices, has the ranks agree on the
// collective (CollectiveCheck.h), issues it on the host backend over zero-copy aliases, and wraps the
// host's work so that callers see their own tensors. Each collective below only says what it is
// (ProcessGroupNeuron::Call) and how the host runs it.

// What a collective tells the template.
struct ProcessGroupNeuron::Call {
  OpType op;
  const char* name;        // as users call it, for messages: "all_reduce"
  TensorList tensors;      // every tensor of the call: all neuron, or all CPU
  TensorList outputs;      // what result() and the future yield
  at::Tensor example;      // shown in error messages (undefined: none)
  std::optional<Sig> signature;  // what the ranks agree on first; none: point-to-point, unchecked
};

// What the host backend was given: its work, and a step to run once it succeeded (or null).
struct ProcessGroupNeuron::Issued {
  c10::intrusive_ptr<Work> work;
  std::function<void()> finish;
};

template <typename OnHost>
c10::intrusive_ptr<Work> ProcessGroupNeuron::collective(Call call, OnHost&& on_host) {
  check_devices(call.name, call.tensors);
  auto verify = call.signature ? agree(*call.signature) : nullptr;
  Issued issued = issue(verify, std::forward<OnHost>(on_host));
  return wrap(issued.work, std::move(call.outputs), then(verify, std::move(issued.finish)), call.op, call.name,
              call.example);
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) {
  const auto& example = first(tensors, "broadcast");
  auto sig = Sig::of(OpType::BROADCAST, example, tensors.size(), numel_of(tensors)).with_root(opts.rootRank);
  return collective({OpType::BROADCAST, "broadcast", tensors, tensors, example, sig}, [&]() -> Issued {
    auto host = on_host(tensors);
    return {host_->broadcast(host, opts), nullptr};
  });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts) {
  const auto& example = first(tensors, "all_reduce");
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "all_reduce");
  auto sig = Sig::of(OpType::ALLREDUCE, example, tensors.size(), numel_of(tensors)).with_reduce(opts.reduceOp.op_);
  return collective({OpType::ALLREDUCE, "all_reduce", tensors, tensors, example, sig}, [&]() -> Issued {
    auto host = on_host(tensors);
    plan.scale_in_place(host);
    auto host_opts = opts;
    host_opts.reduceOp = plan.host_op;
    return {host_->allreduce(host, host_opts), finisher(plan, host)};
  });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::allreduce_coalesced(TensorList& tensors,
                                                                 const c10d::AllreduceCoalescedOptions& opts) {
  const auto& example = first(tensors, "all_reduce_coalesced");
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "all_reduce_coalesced");
  auto sig = Sig::of(OpType::ALLREDUCE_COALESCED, example, tensors.size(), numel_of(tensors))
                 .with_reduce(opts.reduceOp.op_);
  return collective({OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced", tensors, tensors, example, sig},
                    [&]() -> Issued {
                      auto host = on_host(tensors);
                      plan.scale_in_place(host);
                      auto host_opts = opts;
                      host_opts.reduceOp = plan.host_op;
                      return {host_->allreduce_coalesced(host, host_opts), finisher(plan, host)};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::reduce(TensorList& tensors, const c10d::ReduceOptions& opts) {
  const auto& example = first(tensors, "reduce");
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "reduce");
  // Scaling in place would change the non-root ranks' tensors, which reduce leaves as they were.
  TORCH_CHECK(!plan.premul, "neuron backend: reduce does not take PREMUL_SUM; use all_reduce or reduce_scatter");
  auto sig = Sig::of(OpType::REDUCE, example, tensors.size(), numel_of(tensors))
                 .with_reduce(opts.reduceOp.op_)
                 .with_root(opts.rootRank);
  return collective({OpType::REDUCE, "reduce", tensors, tensors, example, sig}, [&]() -> Issued {
    auto host = on_host(tensors);
    auto host_opts = opts;
    host_opts.reduceOp = plan.host_op;
    return {host_->reduce(host, host_opts), rank_ == opts.rootRank ? finisher(plan, host) : nullptr};
  });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::allgather(TensorLists& outputs, TensorList& inputs,
                                                       const c10d::AllgatherOptions& opts) {
  auto flat_out = flatten(outputs);
  const auto& example = first(inputs, "all_gather");
  auto sig = Sig::of(OpType::ALLGATHER, example, inputs.size(), numel_of(inputs) + numel_of(flat_out));
  return collective({OpType::ALLGATHER, "all_gather", both(flat_out, inputs), flat_out, example, sig},
                    [&]() -> Issued {
                      auto host_out = on_host(outputs);
                      auto host_in = on_host(inputs);
                      return {host_->allgather(host_out, host_in, opts), nullptr};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                             const c10d::AllgatherOptions& opts) {
  auto sig = Sig::of(OpType::_ALLGATHER_BASE, input, 1, input.numel() + output.numel());
  return collective({OpType::_ALLGATHER_BASE, "all_gather_into_tensor", {output, input}, {output}, input, sig},
                    [&]() -> Issued {
                      auto host_out = on_host(output);
                      auto host_in = on_host(input);
                      return {host_->_allgather_base(host_out, host_in, opts), nullptr};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::allgather_coalesced(TensorLists& outputs, TensorList& inputs,
                                                                 const c10d::AllgatherOptions& opts) {
  auto flat_out = flatten(outputs);
  const auto& example = first(inputs, "all_gather_coalesced");
  auto sig = Sig::of(OpType::ALLGATHER_COALESCED, example, inputs.size(), numel_of(inputs) + numel_of(flat_out));
  return collective(
      {OpType::ALLGATHER_COALESCED, "all_gather_coalesced", both(flat_out, inputs), flat_out, example, sig},
      [&]() -> Issued {
        auto host_out = on_host(outputs);
        auto host_in = on_host(inputs);
        return {host_->allgather_coalesced(host_out, host_in, opts), nullptr};
      });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::allgather_into_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                                             const c10d::AllgatherOptions& opts) {
  const auto& example = first(inputs, "all_gather_into_tensor_coalesced");
  auto sig = Sig::of(OpType::COALESCED, example, inputs.size(), numel_of(inputs) + numel_of(outputs));
  return collective(
      {OpType::COALESCED, "all_gather_into_tensor_coalesced", both(outputs, inputs), outputs, example, sig},
      [&]() -> Issued {
        auto host_out = on_host(outputs);
        auto host_in = on_host(inputs);
        return {host_->allgather_into_tensor_coalesced(host_out, host_in, opts), nullptr};
      });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::gather(TensorLists& outputs, TensorList& inputs,
                                                    const c10d::GatherOptions& opts) {
  auto flat_out = flatten(outputs);  // empty on ranks other than the root
  const auto& example = first(inputs, "gather");
  auto sig = Sig::of(OpType::GATHER, example, inputs.size(), numel_of(inputs)).with_root(opts.rootRank);
  return collective({OpType::GATHER, "gather", both(flat_out, inputs), flat_out, example, sig}, [&]() -> Issued {
    auto host_out = on_host(outputs);
    auto host_in = on_host(inputs);
    return {host_->gather(host_out, host_in, opts), nullptr};
  });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::scatter(TensorList& outputs, TensorLists& inputs,
                                                     const c10d::ScatterOptions& opts) {
  const auto& example = first(outputs, "scatter");
  auto sig = Sig::of(OpType::SCATTER, example, outputs.size(), numel_of(outputs)).with_root(opts.rootRank);
  // inputs are empty on ranks other than the root
  return collective({OpType::SCATTER, "scatter", both(outputs, flatten(inputs)), outputs, example, sig},
                    [&]() -> Issued {
                      auto host_out = on_host(outputs);
                      auto host_in = on_host(inputs);
                      return {host_->scatter(host_out, host_in, opts), nullptr};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::reduce_scatter(TensorList& outputs, TensorLists& inputs,
                                                            const c10d::ReduceScatterOptions& opts) {
  auto flat_in = flatten(inputs);
  const auto& example = first(outputs, "reduce_scatter");
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "reduce_scatter");
  auto sig = Sig::of(OpType::REDUCE_SCATTER, example, outputs.size(), numel_of(outputs) + numel_of(flat_in))
                 .with_reduce(opts.reduceOp.op_);
  return collective({OpType::REDUCE_SCATTER, "reduce_scatter", both(outputs, flat_in), outputs, example, sig},
                    [&]() -> Issued {
                      auto host_out = on_host(outputs);
                      TensorLists host_in;
                      for (const auto& l : inputs) host_in.push_back(plan.scaled_copies(on_host(l)));
                      auto host_opts = opts;
                      host_opts.reduceOp = plan.host_op;
                      return {host_->reduce_scatter(host_out, host_in, host_opts), finisher(plan, host_out)};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::ReduceScatterOptions& opts) {
  auto plan = HostReduction::plan(opts.reduceOp, output.scalar_type(), size_, "reduce_scatter_tensor");
  auto sig = Sig::of(OpType::_REDUCE_SCATTER_BASE, output, 1, output.numel() + input.numel())
                 .with_reduce(opts.reduceOp.op_);
  return collective(
      {OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", {output, input}, {output}, input, sig},
      [&]() -> Issued {
        auto host_out = on_host(output);
        auto host_in = plan.scaled_copies({on_host(input)})[0];
        auto host_opts = opts;
        host_opts.reduceOp = plan.host_op;
        return {host_->_reduce_scatter_base(host_out, host_in, host_opts), finisher(plan, {host_out})};
      });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::reduce_scatter_tensor_coalesced(
    TensorList& outputs, TensorList& inputs, const c10d::ReduceScatterOptions& opts) {
  const auto& example = first(outputs, "reduce_scatter_tensor_coalesced");
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "reduce_scatter_tensor_coalesced");
  auto sig = Sig::of(OpType::REDUCE_SCATTER_TENSOR_COALESCED, example, outputs.size(),
                     numel_of(outputs) + numel_of(inputs))
                 .with_reduce(opts.reduceOp.op_);
  return collective({OpType::REDUCE_SCATTER_TENSOR_COALESCED, "reduce_scatter_tensor_coalesced",
                     both(outputs, inputs), outputs, example, sig},
                    [&]() -> Issued {
                      auto host_out = on_host(outputs);
                      auto host_in = plan.scaled_copies(on_host(inputs));
                      auto host_opts = opts;
                      host_opts.reduceOp = plan.host_op;
                      return {host_->reduce_scatter_tensor_coalesced(host_out, host_in, host_opts),
                              finisher(plan, host_out)};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                           std::vector<int64_t>& output_split_sizes,
                                                           std::vector<int64_t>& input_split_sizes,
                                                           const c10d::AllToAllOptions& opts) {
  auto sig = Sig::of(OpType::ALLTOALL_BASE, input, 1, input.numel() + output.numel());
  if (!output_split_sizes.empty() || !input_split_sizes.empty()) sig.any_shape();  // uneven: sizes differ by rank
  return collective({OpType::ALLTOALL_BASE, "all_to_all_single", {output, input}, {output}, input, sig},
                    [&]() -> Issued {
                      auto host_out = on_host(output);
                      auto host_in = on_host(input);
                      return {host_->alltoall_base(host_out, host_in, output_split_sizes, input_split_sizes, opts),
                              nullptr};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::alltoall(TensorList& outputs, TensorList& inputs,
                                                      const c10d::AllToAllOptions& opts) {
  const auto& example = first(inputs, "all_to_all");
  auto sig = Sig::of(OpType::ALLTOALL, example, inputs.size(), -1).any_shape();
  return collective({OpType::ALLTOALL, "all_to_all", both(outputs, inputs), outputs, example, sig}, [&]() -> Issued {
    auto host_out = on_host(outputs);
    auto host_in = on_host(inputs);
    return {host_->alltoall(host_out, host_in, opts), nullptr};
  });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::send(TensorList& tensors, int dst_rank, int tag) {
  return collective({OpType::SEND, "send", tensors, tensors, first(tensors, "send"), std::nullopt}, [&]() -> Issued {
    auto host = on_host(tensors);
    return {host_->send(host, dst_rank, tag), nullptr};
  });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::recv(TensorList& tensors, int src_rank, int tag) {
  return collective({OpType::RECV, "recv", tensors, tensors, first(tensors, "recv"), std::nullopt}, [&]() -> Issued {
    auto host = on_host(tensors);
    return {host_->recv(host, src_rank, tag), nullptr};
  });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::recvAnysource(TensorList& tensors, int tag) {
  return collective({OpType::RECVANYSOURCE, "recv (any source)", tensors, tensors, first(tensors, "recv"),
                     std::nullopt},
                    [&]() -> Issued {
                      auto host = on_host(tensors);
                      return {host_->recvAnysource(host, tag), nullptr};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::barrier(const c10d::BarrierOptions& opts) {
  // The device in opts (barrier(device_ids=[local_rank])) only chose this
  // backend; the host's barrier needs no tensor.
  return collective({OpType::BARRIER, "barrier", {}, {}, at::Tensor(), Sig::of(OpType::BARRIER, at::Tensor(), 0, -1)},
                    [&]() -> Issued { return {host_->barrier(opts), nullptr}; });
}

// ---- group management ------------------------------------------------------

c10::intrusive_ptr<c10d::Backend> ProcessGroupNeuron::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                            const std::vector<int>& ranks,
                                                            const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end()) return nullptr;  // this rank is not in the new group
  int group_rank = static_cast<int>(std::distance(ranks.begin(), it));

  std::lock_guard<std::mutex> guard(split_mutex_);
  std::string key = c10::str(static_cast<const void*>(store.get()), "/", opts ? opts->group_name : "", "/", ranks);
  if (key == last_split_key_) {
    if (auto same = last_split_.lock()) return same;
  }

  auto child = c10::make_intrusive<Options>(opts ? opts->timeout : options_->timeout);
  if (opts) {
    child->group_name = opts->group_name;
    child->group_desc = opts->group_desc;
  }
  const auto& parent_global = options_->global_ranks_in_group;
  for (int r : ranks) {
    child->global_ranks_in_group.push_back(parent_global.empty() ? static_cast<uint64_t>(r) : parent_global.at(r));
  }
  auto host = host_factory_(store, group_rank, static_cast<int>(ranks.size()), child);
  TORCH_CHECK(host, "neuron backend: the host backend factory returned nothing for split ranks ", ranks);
  c10::intrusive_ptr<c10d::Backend> split =
      c10::make_intrusive<ProcessGroupNeuron>(std::move(host), std::move(child), host_factory_, store);
  last_split_key_ = std::move(key);
  last_split_ = c10::weak_intrusive_ptr<c10d::Backend>(split);
  return split;
}

void ProcessGroupNeuron::setTimeout(std::chrono::milliseconds timeout) {
  options_->timeout = timeout;
  host_->setTimeout(timeout);
}

void ProcessGroupNeuron::setGroupUid(const std::string& pg_uid) {
  c10d::Backend::setGroupUid(pg_uid);
  host_->setGroupUid(pg_uid);
}

} // namespace neuron::distributed
