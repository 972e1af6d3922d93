#include "distributed/ProcessGroupNeuron.h"

#include "Neuron.h"
#include "distributed/CollectiveCheck.h"
#include "distributed/HostReduction.h"

#include <algorithm>

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
c10::intrusive_ptr<Work> issue(const std::function<void()>& verify, F&& fn) {
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

c10::intrusive_ptr<Work> ProcessGroupNeuron::broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) {
  check_devices("broadcast", tensors);
  agree(Sig::of(OpType::BROADCAST, first(tensors, "broadcast"), tensors.size(), numel_of(tensors))
            .with_root(opts.rootRank));
  auto host = on_host(tensors);
  auto work = host_->broadcast(host, opts);
  return wrap(work, tensors, nullptr, OpType::BROADCAST, "broadcast", first(tensors, "broadcast"));
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts) {
  check_devices("all_reduce", tensors);
  const auto& example = first(tensors, "all_reduce");
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "all_reduce");
  auto verify =
      agree(Sig::of(OpType::ALLREDUCE, example, tensors.size(), numel_of(tensors)).with_reduce(opts.reduceOp.op_));
  auto host = on_host(tensors);
  plan.scale_in_place(host);
  auto host_opts = opts;
  host_opts.reduceOp = plan.host_op;
  auto work = issue(verify, [&] { return host_->allreduce(host, host_opts); });
  return wrap(work, tensors, then(verify, finisher(plan, host)), OpType::ALLREDUCE, "all_reduce", example);
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::allreduce_coalesced(TensorList& tensors,
                                                                 const c10d::AllreduceCoalescedOptions& opts) {
  check_devices("all_reduce_coalesced", tensors);
  const auto& example = first(tensors, "all_reduce_coalesced");
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "all_reduce_coalesced");
  agree(Sig::of(OpType::ALLREDUCE_COALESCED, example, tensors.size(), numel_of(tensors))
            .with_reduce(opts.reduceOp.op_));
  auto host = on_host(tensors);
  plan.scale_in_place(host);
  auto host_opts = opts;
  host_opts.reduceOp = plan.host_op;
  auto work = host_->allreduce_coalesced(host, host_opts);
  return wrap(work, tensors, finisher(plan, host), OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced", example);
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::reduce(TensorList& tensors, const c10d::ReduceOptions& opts) {
  check_devices("reduce", tensors);
  const auto& example = first(tensors, "reduce");
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "reduce");
  // Scaling in place would change the non-root ranks' tensors, which reduce leaves as they were.
  TORCH_CHECK(!plan.premul, "neuron backend: reduce does not take PREMUL_SUM; use all_reduce or reduce_scatter");
  agree(Sig::of(OpType::REDUCE, example, tensors.size(), numel_of(tensors))
            .with_reduce(opts.reduceOp.op_)
            .with_root(opts.rootRank));
  auto host = on_host(tensors);
  auto host_opts = opts;
  host_opts.reduceOp = plan.host_op;
  auto work = host_->reduce(host, host_opts);
  auto finish = rank_ == opts.rootRank ? finisher(plan, host) : nullptr;
  return wrap(work, tensors, std::move(finish), OpType::REDUCE, "reduce", example);
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::allgather(TensorLists& outputs, TensorList& inputs,
                                                       const c10d::AllgatherOptions& opts) {
  auto flat_out = flatten(outputs);
  check_devices("all_gather", flat_out);
  check_devices("all_gather", inputs);
  agree(Sig::of(OpType::ALLGATHER, first(inputs, "all_gather"), inputs.size(), numel_of(inputs) + numel_of(flat_out)));
  auto host_out = on_host(outputs);
  auto host_in = on_host(inputs);
  auto work = host_->allgather(host_out, host_in, opts);
  return wrap(work, flat_out, nullptr, OpType::ALLGATHER, "all_gather", first(inputs, "all_gather"));
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                             const c10d::AllgatherOptions& opts) {
  check_devices("all_gather_into_tensor", {output, input});
  auto verify = agree(Sig::of(OpType::_ALLGATHER_BASE, input, 1, input.numel() + output.numel()));
  auto host_out = on_host(output);
  auto host_in = on_host(input);
  auto work = issue(verify, [&] { return host_->_allgather_base(host_out, host_in, opts); });
  return wrap(work, {output}, verify, OpType::_ALLGATHER_BASE, "all_gather_into_tensor", input);
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::allgather_coalesced(TensorLists& outputs, TensorList& inputs,
                                                                 const c10d::AllgatherOptions& opts) {
  auto flat_out = flatten(outputs);
  check_devices("all_gather_coalesced", flat_out);
  check_devices("all_gather_coalesced", inputs);
  agree(Sig::of(OpType::ALLGATHER_COALESCED, first(inputs, "all_gather_coalesced"), inputs.size(),
                numel_of(inputs) + numel_of(flat_out)));
  auto host_out = on_host(outputs);
  auto host_in = on_host(inputs);
  auto work = host_->allgather_coalesced(host_out, host_in, opts);
  return wrap(work, flat_out, nullptr, OpType::ALLGATHER_COALESCED, "all_gather_coalesced",
              first(inputs, "all_gather_coalesced"));
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::allgather_into_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                                             const c10d::AllgatherOptions& opts) {
  check_devices("all_gather_into_tensor_coalesced", outputs);
  check_devices("all_gather_into_tensor_coalesced", inputs);
  agree(Sig::of(OpType::COALESCED, first(inputs, "all_gather_into_tensor_coalesced"), inputs.size(),
                numel_of(inputs) + numel_of(outputs)));
  auto host_out = on_host(outputs);
  auto host_in = on_host(inputs);
  auto work = host_->allgather_into_tensor_coalesced(host_out, host_in, opts);
  return wrap(work, outputs, nullptr, OpType::COALESCED, "all_gather_into_tensor_coalesced",
              first(inputs, "all_gather_into_tensor_coalesced"));
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::gather(TensorLists& outputs, TensorList& inputs,
                                                    const c10d::GatherOptions& opts) {
  auto flat_out = flatten(outputs);  // empty on ranks other than the root
  check_devices("gather", flat_out);
  check_devices("gather", inputs);
  agree(Sig::of(OpType::GATHER, first(inputs, "gather"), inputs.size(), numel_of(inputs)).with_root(opts.rootRank));
  auto host_out = on_host(outputs);
  auto host_in = on_host(inputs);
  auto work = host_->gather(host_out, host_in, opts);
  return wrap(work, flat_out, nullptr, OpType::GATHER, "gather", first(inputs, "gather"));
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::scatter(TensorList& outputs, TensorLists& inputs,
                                                     const c10d::ScatterOptions& opts) {
  check_devices("scatter", outputs);
  check_devices("scatter", flatten(inputs));  // empty on ranks other than the root
  agree(Sig::of(OpType::SCATTER, first(outputs, "scatter"), outputs.size(), numel_of(outputs))
            .with_root(opts.rootRank));
  auto host_out = on_host(outputs);
  auto host_in = on_host(inputs);
  auto work = host_->scatter(host_out, host_in, opts);
  return wrap(work, outputs, nullptr, OpType::SCATTER, "scatter", first(outputs, "scatter"));
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::reduce_scatter(TensorList& outputs, TensorLists& inputs,
                                                            const c10d::ReduceScatterOptions& opts) {
  check_devices("reduce_scatter", outputs);
  check_devices("reduce_scatter", flatten(inputs));
  const auto& example = first(outputs, "reduce_scatter");
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "reduce_scatter");
  agree(Sig::of(OpType::REDUCE_SCATTER, example, outputs.size(), numel_of(outputs) + numel_of(flatten(inputs)))
            .with_reduce(opts.reduceOp.op_));
  auto host_out = on_host(outputs);
  TensorLists host_in;
  for (const auto& l : inputs) host_in.push_back(plan.scaled_copies(on_host(l)));
  auto host_opts = opts;
  host_opts.reduceOp = plan.host_op;
  auto work = host_->reduce_scatter(host_out, host_in, host_opts);
  return wrap(work, outputs, finisher(plan, host_out), OpType::REDUCE_SCATTER, "reduce_scatter", example);
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::ReduceScatterOptions& opts) {
  check_devices("reduce_scatter_tensor", {output, input});
  auto plan = HostReduction::plan(opts.reduceOp, output.scalar_type(), size_, "reduce_scatter_tensor");
  auto verify = agree(Sig::of(OpType::_REDUCE_SCATTER_BASE, output, 1, output.numel() + input.numel())
                         .with_reduce(opts.reduceOp.op_));
  auto host_out = on_host(output);
  auto host_in = plan.scaled_copies({on_host(input)})[0];
  auto host_opts = opts;
  host_opts.reduceOp = plan.host_op;
  auto work = issue(verify, [&] { return host_->_reduce_scatter_base(host_out, host_in, host_opts); });
  return wrap(work, {output}, then(verify, finisher(plan, {host_out})), OpType::_REDUCE_SCATTER_BASE,
              "reduce_scatter_tensor", input);
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::reduce_scatter_tensor_coalesced(
    TensorList& outputs, TensorList& inputs, const c10d::ReduceScatterOptions& opts) {
  check_devices("reduce_scatter_tensor_coalesced", outputs);
  check_devices("reduce_scatter_tensor_coalesced", inputs);
  const auto& example = first(outputs, "reduce_scatter_tensor_coalesced");
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "reduce_scatter_tensor_coalesced");
  agree(Sig::of(OpType::REDUCE_SCATTER_TENSOR_COALESCED, example, outputs.size(), numel_of(outputs) + numel_of(inputs))
            .with_reduce(opts.reduceOp.op_));
  auto host_out = on_host(outputs);
  auto host_in = plan.scaled_copies(on_host(inputs));
  auto host_opts = opts;
  host_opts.reduceOp = plan.host_op;
  auto work = host_->reduce_scatter_tensor_coalesced(host_out, host_in, host_opts);
  return wrap(work, outputs, finisher(plan, host_out), OpType::REDUCE_SCATTER_TENSOR_COALESCED,
              "reduce_scatter_tensor_coalesced", example);
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                           std::vector<int64_t>& output_split_sizes,
                                                           std::vector<int64_t>& input_split_sizes,
                                                           const c10d::AllToAllOptions& opts) {
  check_devices("all_to_all_single", {output, input});
  auto signature = Sig::of(OpType::ALLTOALL_BASE, input, 1, input.numel() + output.numel());
  if (!output_split_sizes.empty() || !input_split_sizes.empty()) signature.any_shape();  // uneven: sizes differ by rank
  agree(signature);
  auto host_out = on_host(output);
  auto host_in = on_host(input);
  auto work = host_->alltoall_base(host_out, host_in, output_split_sizes, input_split_sizes, opts);
  return wrap(work, {output}, nullptr, OpType::ALLTOALL_BASE, "all_to_all_single", input);
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::alltoall(TensorList& outputs, TensorList& inputs,
                                                      const c10d::AllToAllOptions& opts) {
  check_devices("all_to_all", outputs);
  check_devices("all_to_all", inputs);
  agree(Sig::of(OpType::ALLTOALL, first(inputs, "all_to_all"), inputs.size(), -1).any_shape());
  auto host_out = on_host(outputs);
  auto host_in = on_host(inputs);
  auto work = host_->alltoall(host_out, host_in, opts);
  return wrap(work, outputs, nullptr, OpType::ALLTOALL, "all_to_all", first(inputs, "all_to_all"));
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::send(TensorList& tensors, int dst_rank, int tag) {
  check_devices("send", tensors);
  auto host = on_host(tensors);
  auto work = host_->send(host, dst_rank, tag);
  return wrap(work, tensors, nullptr, OpType::SEND, "send", first(tensors, "send"));
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::recv(TensorList& tensors, int src_rank, int tag) {
  check_devices("recv", tensors);
  auto host = on_host(tensors);
  auto work = host_->recv(host, src_rank, tag);
  return wrap(work, tensors, nullptr, OpType::RECV, "recv", first(tensors, "recv"));
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::recvAnysource(TensorList& tensors, int tag) {
  check_devices("recv", tensors);
  auto host = on_host(tensors);
  auto work = host_->recvAnysource(host, tag);
  return wrap(work, tensors, nullptr, OpType::RECVANYSOURCE, "recv (any source)", first(tensors, "recv"));
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::barrier(const c10d::BarrierOptions& opts) {
  // The device in opts (barrier(device_ids=[local_rank])) only chose this
  // backend; the host's barrier needs no tensor.
  agree(Sig::of(OpType::BARRIER, at::Tensor(), 0, -1));
  auto work = host_->barrier(opts);
  return wrap(work, {}, nullptr, OpType::BARRIER, "barrier", at::Tensor());
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
