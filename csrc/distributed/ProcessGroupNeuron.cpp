#include "distributed/ProcessGroupNeuron.h"

#include "core/Device.h"
#include "core/HostBridge.h"
#include "distributed/CollectiveArguments.h"
#include "distributed/CollectiveCheck.h"
#include "distributed/CollectiveError.h"
#include "distributed/HostReduction.h"
#include "distributed/RankOrderReduction.h"

#include <algorithm>
#include <optional>

namespace neuron::distributed {
namespace {

namespace args = arguments;
using args::Refusal;
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

// The backend serves neuron tensors only, as TorchNeuron's: torch sends a call to the backend of its
// first tensor's device, so a CPU tensor reaches this one only mixed with neuron tensors, which is
// almost always a forgotten .to(device) that gloo would accept silently.
std::string device_refusal(const TensorList& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (!t.defined() || t.device().type() == kNeuron) continue;
    return c10::str("Expected neuron device, got ", t.device(), " (tensor ", i, " of the call). The neuron backend ",
                    "takes neuron tensors: move it with .to('neuron'), or run CPU tensors on a gloo group ",
                    "(dist.new_group(backend='gloo'), or init_process_group('cpu:gloo,neuron:neuron'))");
  }
  return "";
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

// A tensor's bytes as the shared-memory path needs them: contiguous host memory. A tensor that is
// not contiguous goes through a contiguous copy, written back if it is an output.
struct HostBytes {
  at::Tensor user;   // the host view of the caller's tensor
  at::Tensor dense;  // `user`, or its contiguous copy
  explicit HostBytes(const at::Tensor& t) : user(on_host(t)), dense(user.is_contiguous() ? user : user.contiguous()) {}
  void* ptr() const { return dense.data_ptr(); }
  int64_t bytes() const { return static_cast<int64_t>(dense.nbytes()); }
  void write_back() {
    if (!dense.is_same(user)) user.copy_(dense);
  }
};

std::vector<HostBytes> host_bytes(const TensorList& ts) {
  std::vector<HostBytes> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.emplace_back(t);
  return out;
}

void write_back(std::vector<HostBytes>& bs) {
  for (auto& b : bs) b.write_back();
}

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

// Starts a collective that may have started before every rank posted (`verify`: the step that
// finishes its check, or null) on either path. The one place that decides what becomes of the check
// when starting throws: it still runs (it releases the board's slot) and the starting error is the one
// raised; except when the group is broken (a peer died or the timeout passed: c10::DistBackendError),
// where the check is left unfinished (it would wait for the same peers again) and the failure is
// raised as the collective's (`describe_call()` names it; only called on failure).
template <typename Describe, typename F>
auto start(const std::function<void()>& verify, Describe&& describe_call, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const c10::DistBackendError& e) {
    raise_collective_failure(describe_call(), message_of(e));
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
  if (SharedMemoryCollectives::enabled() && size_ > 1) {
    shm_ = SharedMemoryCollectives::connect(*store, rank_, size_, options_->timeout);
  }
  // Point-to-point over shared memory copies between the ranks' processes: where they may (the same on every rank).
  if (shm_ && shm_->reads_peers_directly()) {
    p2p_ = SharedMemoryPointToPoint::connect(*store, rank_, size_, options_->timeout);
  }
  init();
}

std::string ProcessGroupNeuron::describe(const char* name, const at::Tensor& example) const {
  std::string text = c10::str(name, " on rank ", rank_, " of ", size_);
  if (example.defined()) {
    text += c10::str(" (", example.scalar_type(), example.sizes(), " on ", example.device(), ")");
  }
  return text;
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::wrap(c10::intrusive_ptr<Work> host_work, TensorList outputs,
                                                  std::function<void()> finish, OpType op, const char* name,
                                                  const at::Tensor& example, uint64_t seq) const {
  return c10::make_intrusive<NeuronWork>(std::move(host_work), std::move(outputs), std::move(finish), op, rank_,
                                         describe(name, example), seq);
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
  // On the path the reference's collective takes (which depends on its reduction, as HostReduction
  // turns it into one the paths run).
  auto op = static_cast<c10d::ReduceOp::RedOpType>(reference.reduce_op);
  if (op == c10d::ReduceOp::PREMUL_SUM || (op == c10d::ReduceOp::AVG && at::isIntegralType(dtype, true))) {
    op = c10d::ReduceOp::SUM;
  }
  const bool on_shm = shm_ && (reference.reduce_op < 0 || reducible_in_rank_order(dtype, op));
  switch (reference.op) {
    case OpType::ALLREDUCE: {
      TensorList t{zeros(n)};
      if (on_shm) {
        shm_->all_reduce(t[0].data_ptr(), n, dtype, op);
      } else {
        host_->allreduce(t, c10d::AllreduceOptions())->wait();
      }
      break;
    }
    case OpType::_ALLGATHER_BASE: {
      auto in = zeros(n), out = zeros(n * size_);
      if (shm_) {
        std::vector<void*> outs;
        for (int q = 0; q < size_; ++q) outs.push_back(static_cast<char*>(out.data_ptr()) + q * in.nbytes());
        shm_->all_gather(outs, in.data_ptr(), static_cast<int64_t>(in.nbytes()));
      } else {
        host_->_allgather_base(out, in, c10d::AllgatherOptions())->wait();
      }
      break;
    }
    case OpType::_REDUCE_SCATTER_BASE: {
      auto out = zeros(n), in = zeros(n * size_);
      if (on_shm) {
        std::vector<const void*> chunks;
        for (int q = 0; q < size_; ++q) chunks.push_back(static_cast<char*>(in.data_ptr()) + q * out.nbytes());
        shm_->reduce_scatter(out.data_ptr(), chunks, n, dtype, op);
      } else {
        host_->_reduce_scatter_base(out, in, c10d::ReduceScatterOptions())->wait();
      }
      break;
    }
    default:
      TORCH_INTERNAL_ASSERT(false, "neuron backend: no stand-in for ", reference.describe());
  }
}

// ---- collectives -----------------------------------------------------------
//
// Every collective goes through collective(): it checks the devices, has the ranks agree on the
// collective (CollectiveCheck.h), and either runs it on shared memory in the calling thread (ranks of
// one host) or issues it on the host backend over zero-copy aliases and wraps the host's work so that
// callers see their own tensors. Each collective below only says what it is
// (ProcessGroupNeuron::Call), how shared memory runs it (if it can) and how the host runs it. Whether
// shared memory runs a call depends only on what the ranks agreed on (op, dtype, reduction), so
// every rank takes the same path.

// What a collective tells the template.
struct ProcessGroupNeuron::Call {
  OpType op;
  const char* name;        // as users call it, for messages: "all_reduce"
  TensorList tensors;      // every tensor of the call (all neuron: device_refusal)
  TensorList outputs;      // what result() and the future yield
  at::Tensor example;      // shown in error messages (undefined: none)
  std::optional<Sig> signature;  // what the ranks agree on first; none: point-to-point, unchecked
  std::string refusal = {};  // why this rank refuses the arguments (CollectiveArguments.h), or ""
};

// What the host backend was given: its work, and a step to run once it succeeded (or null).
struct ProcessGroupNeuron::Issued {
  c10::intrusive_ptr<Work> work;
  std::function<void()> finish;
};

template <typename OnHost>
c10::intrusive_ptr<Work> ProcessGroupNeuron::collective(Call call, const std::function<void()>& on_shm,
                                                        OnHost&& on_host) {
  if (call.refusal.empty()) {
    auto wrong_device = device_refusal(call.tensors);
    if (!wrong_device.empty()) call.refusal = c10::str("neuron backend: ", call.name, ": ", wrong_device);
  }
  if (!call.refusal.empty()) refuse(call);
  const uint64_t seq = seq_.fetch_add(1);
  auto verify = call.signature ? agree(*call.signature) : nullptr;
  auto described = [&] { return describe(call.name, call.example); };
  if (on_shm) {
    start(verify, described, on_shm);
    if (verify) verify();
    return c10::make_intrusive<CompletedWork>(std::move(call.outputs), call.op, rank_, seq);
  }
  Issued issued = start(verify, described, std::forward<OnHost>(on_host));
  return wrap(issued.work, std::move(call.outputs), then(verify, std::move(issued.finish)), call.op, call.name,
              call.example, seq);
}

// A rank that refuses its arguments still meets the others in the pre-collective check, with a
// signature that says so: they then raise too (naming this rank) instead of waiting for it, a rank
// whose collective already started on the reference's arguments gets the stand-in it needs, and
// this rank raises its own reason. Without the check (size 1, TORCHNEURON_COLLECTIVE_CHECKS=0), or
// for point-to-point, it raises at once.
void ProcessGroupNeuron::refuse(const Call& call) {
  if (call.signature) {
    try {
      if (auto verify = agree(Sig(*call.signature).with_refusal())) verify();
    } catch (const c10::DistBackendError&) {
      // the ranks disagreed, as they must when only this one refuses: its own reason is the error
    }
  }
  C10_THROW_ERROR(ValueError, call.refusal);
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) {
  const auto& example = first(tensors, "broadcast");
  auto sig = Sig::of(OpType::BROADCAST, example, tensors.size(), numel_of(tensors)).with_root(opts.rootRank);
  std::function<void()> on_shm;
  if (shm_) {
    on_shm = [&] {
      auto bytes = host_bytes(tensors);
      for (auto& b : bytes) shm_->broadcast(b.ptr(), b.bytes(), static_cast<int>(opts.rootRank));
      if (rank_ != opts.rootRank) write_back(bytes);
    };
  }
  Refusal refusal("broadcast");
  refusal.check(args::root(opts.rootRank, size_, "broadcast"));
  return collective({OpType::BROADCAST, "broadcast", tensors, tensors, example, sig, refusal.text()}, on_shm,
                    [&]() -> Issued {
    auto host = on_host(tensors);
    return {host_->broadcast(host, opts), nullptr};
  });
}

// all_reduce and its coalesced form: every tensor reduced on its own, in order.
std::function<void()> ProcessGroupNeuron::all_reduce_on_shm(TensorList& tensors, const HostReduction& plan) {
  if (!shm_ || !reducible_in_rank_order(tensors[0].scalar_type(), plan.host_op.op_)) return nullptr;
  return [this, &tensors, plan] {
    auto host = on_host(tensors);
    plan.scale_in_place(host);
    auto bytes = host_bytes(host);
    for (auto& b : bytes) shm_->all_reduce(b.ptr(), b.dense.numel(), b.dense.scalar_type(), plan.host_op.op_);
    write_back(bytes);
    if (plan.needs_finish()) plan.finish(host);
  };
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts) {
  const auto& example = first(tensors, "all_reduce");
  Refusal refusal("all_reduce");
  refusal.check(args::reduction(opts.reduceOp)).check(args::not_empty(tensors));
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "all_reduce");
  auto sig = Sig::of(OpType::ALLREDUCE, example, tensors.size(), numel_of(tensors)).with_reduce(opts.reduceOp.op_);
  return collective({OpType::ALLREDUCE, "all_reduce", tensors, tensors, example, sig, refusal.text()},
                    all_reduce_on_shm(tensors, plan), [&]() -> Issued {
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
  Refusal refusal("all_reduce_coalesced");
  refusal.check(args::reduction(opts.reduceOp));  // empty tensors take part as nothing, as in TorchNeuron
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "all_reduce_coalesced");
  auto sig = Sig::of(OpType::ALLREDUCE_COALESCED, example, tensors.size(), numel_of(tensors))
                 .with_reduce(opts.reduceOp.op_);
  return collective({OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced", tensors, tensors, example, sig,
                     refusal.text()},
                    all_reduce_on_shm(tensors, plan), [&]() -> Issued {
                      auto host = on_host(tensors);
                      plan.scale_in_place(host);
                      auto host_opts = opts;
                      host_opts.reduceOp = plan.host_op;
                      return {host_->allreduce_coalesced(host, host_opts), finisher(plan, host)};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::reduce(TensorList& tensors, const c10d::ReduceOptions& opts) {
  const auto& example = first(tensors, "reduce");
  Refusal refusal("reduce");
  refusal.check(args::root(opts.rootRank, size_, "reduce"))
      .check(args::reduction(opts.reduceOp))
      .check(args::not_empty(tensors));
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "reduce");
  // Scaling in place would change the non-root ranks' tensors, which reduce leaves as they were.
  TORCH_CHECK(!plan.premul, "neuron backend: reduce does not take PREMUL_SUM; use all_reduce or reduce_scatter");
  auto sig = Sig::of(OpType::REDUCE, example, tensors.size(), numel_of(tensors))
                 .with_reduce(opts.reduceOp.op_)
                 .with_root(opts.rootRank);
  const bool root = rank_ == opts.rootRank;
  std::function<void()> on_shm;
  if (shm_ && reducible_in_rank_order(example.scalar_type(), plan.host_op.op_)) {
    on_shm = [&] {
      auto host = on_host(tensors);
      auto bytes = host_bytes(host);
      for (auto& b : bytes) {
        shm_->all_reduce(b.ptr(), b.dense.numel(), b.dense.scalar_type(), plan.host_op.op_,
                         static_cast<int>(opts.rootRank));
      }
      if (root) {
        write_back(bytes);
        if (plan.needs_finish()) plan.finish(host);
      }
    };
  }
  return collective({OpType::REDUCE, "reduce", tensors, tensors, example, sig, refusal.text()}, on_shm,
                    [&]() -> Issued {
    auto host = on_host(tensors);
    auto host_opts = opts;
    host_opts.reduceOp = plan.host_op;
    return {host_->reduce(host, host_opts), root ? finisher(plan, host) : nullptr};
  });
}

// all_gather of one input into `size_` outputs of its size (list form, or slices of one tensor).
void ProcessGroupNeuron::all_gather_on_shm(const at::Tensor& input, const TensorList& outputs) {
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_, "neuron backend: all_gather needs ", size_,
              " output tensors (one per rank), got ", outputs.size());
  HostBytes in(input);
  auto outs = host_bytes(outputs);
  std::vector<void*> ptrs;
  for (auto& o : outs) {
    TORCH_CHECK(o.bytes() == in.bytes(), "neuron backend: all_gather: an output has ", o.dense.numel(),
                " elements of ", o.dense.scalar_type(), ", the input ", in.dense.numel(), " of ",
                in.dense.scalar_type(), "; every output must match the input");
    ptrs.push_back(o.ptr());
  }
  shm_->all_gather(ptrs, in.ptr(), in.bytes());
  write_back(outs);
}

TensorList ProcessGroupNeuron::rank_slices(const at::Tensor& whole, const at::Tensor& part, const char* name) const {
  TORCH_CHECK(whole.numel() == part.numel() * size_ && whole.scalar_type() == part.scalar_type(), "neuron backend: ",
              name, ": the large tensor must hold ", size_, " x the other's elements (", part.numel(), " of ",
              part.scalar_type(), "), got ", whole.numel(), " of ", whole.scalar_type());
  return whole.view({size_, part.numel()}).unbind(0);
}

// all_gather into one tensor of size_ x the input's elements.
void ProcessGroupNeuron::all_gather_into_on_shm(const at::Tensor& output, const at::Tensor& input, const char* name) {
  auto whole = on_host(output);
  auto dense = whole.is_contiguous() ? whole : at::empty(whole.sizes(), whole.options());
  all_gather_on_shm(input, rank_slices(dense, input, name));
  if (!dense.is_same(whole)) whole.copy_(dense);
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::allgather(TensorLists& outputs, TensorList& inputs,
                                                       const c10d::AllgatherOptions& opts) {
  auto flat_out = flatten(outputs);
  const auto& example = first(inputs, "all_gather");
  Refusal refusal("all_gather");
  refusal.check(outputs.size() == inputs.size() ? "" : "needs one list of outputs per input tensor")
      .check(args::no_zero_dim0(both(inputs, flat_out)));
  for (size_t i = 0; i < inputs.size() && i < outputs.size(); ++i) {
    refusal.check(args::one_per_rank(outputs[i], size_, "output tensors"))
        .check(args::each_like(outputs[i], inputs[i], "output", "input"));
  }
  auto sig = Sig::of(OpType::ALLGATHER, example, inputs.size(), numel_of(inputs) + numel_of(flat_out));
  std::function<void()> on_shm;
  if (shm_ && inputs.size() == outputs.size()) {
    on_shm = [&] {
      for (size_t i = 0; i < inputs.size(); ++i) all_gather_on_shm(inputs[i], outputs[i]);
    };
  }
  return collective({OpType::ALLGATHER, "all_gather", both(flat_out, inputs), flat_out, example, sig, refusal.text()},
                    on_shm,
                    [&]() -> Issued {
                      auto host_out = on_host(outputs);
                      auto host_in = on_host(inputs);
                      return {host_->allgather(host_out, host_in, opts), nullptr};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                             const c10d::AllgatherOptions& opts) {
  auto sig = Sig::of(OpType::_ALLGATHER_BASE, input, 1, input.numel() + output.numel());
  Refusal refusal("all_gather_into_tensor");
  refusal.check(args::gathered_output(output, input, size_));
  std::function<void()> on_shm;
  if (shm_) on_shm = [&] { all_gather_into_on_shm(output, input, "all_gather_into_tensor"); };
  return collective({OpType::_ALLGATHER_BASE, "all_gather_into_tensor", {output, input}, {output}, input, sig,
                     refusal.text()},
                    on_shm, [&]() -> Issued {
                      auto host_out = on_host(output);
                      auto host_in = on_host(input);
                      return {host_->_allgather_base(host_out, host_in, opts), nullptr};
                    });
}

// TorchNeuron's layout (its backend.py): outputs[i][rank] receives rank's inputs[i], one list per input
// tensor. Gloo takes the transpose (outputs[rank][i]), given it on the host path.
c10::intrusive_ptr<Work> ProcessGroupNeuron::allgather_coalesced(TensorLists& outputs, TensorList& inputs,
                                                                 const c10d::AllgatherOptions& opts) {
  auto flat_out = flatten(outputs);
  const auto& example = first(inputs, "all_gather_coalesced");
  Refusal refusal("all_gather_coalesced");
  refusal.check(outputs.size() == inputs.size()
                    ? ""
                    : c10::str("number of output lists (", outputs.size(), ") must match number of input tensors (",
                               inputs.size(), "): the outputs are one list per input tensor, of one tensor per rank "
                               "(output_tensor_lists[i][rank] receives rank's input i)"))
      .check(args::no_zero_dim0(both(inputs, flat_out)));
  for (size_t i = 0; i < outputs.size() && i < inputs.size(); ++i) {
    refusal.check(static_cast<int>(outputs[i].size()) == size_
                      ? ""
                      : c10::str("output list ", i, " has ", outputs[i].size(), " tensors, expected one per rank (",
                                 size_, ") (output_tensor_lists[i][rank] receives rank's input i)"))
        .check(args::each_like(outputs[i], inputs[i], "output", "input"));
  }
  auto sig = Sig::of(OpType::ALLGATHER_COALESCED, example, inputs.size(), numel_of(inputs) + numel_of(flat_out));
  std::function<void()> on_shm;
  if (shm_ && outputs.size() == inputs.size()) {
    on_shm = [&] {
      for (size_t i = 0; i < inputs.size(); ++i) all_gather_on_shm(inputs[i], outputs[i]);
    };
  }
  return collective(
      {OpType::ALLGATHER_COALESCED, "all_gather_coalesced", both(flat_out, inputs), flat_out, example, sig,
       refusal.text()},
      on_shm,
      [&]() -> Issued {
        TensorLists host_out(size_);
        for (int q = 0; q < size_; ++q) {
          for (const auto& per_input : outputs) host_out[q].push_back(on_host(per_input[q]));
        }
        auto host_in = on_host(inputs);
        return {host_->allgather_coalesced(host_out, host_in, opts), nullptr};
      });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::allgather_into_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                                             const c10d::AllgatherOptions& opts) {
  const auto& example = first(inputs, "all_gather_into_tensor_coalesced");
  Refusal refusal("all_gather_into_tensor_coalesced");
  refusal.check(outputs.size() == inputs.size() ? "" : "needs one output per input tensor");
  for (size_t i = 0; i < inputs.size() && i < outputs.size(); ++i) {
    refusal.check(args::gathered_output(outputs[i], inputs[i], size_));
  }
  auto sig = Sig::of(OpType::COALESCED, example, inputs.size(), numel_of(inputs) + numel_of(outputs));
  std::function<void()> on_shm;
  if (shm_ && outputs.size() == inputs.size()) {
    on_shm = [&] {
      for (size_t i = 0; i < inputs.size(); ++i) {
        all_gather_into_on_shm(outputs[i], inputs[i], "all_gather_into_tensor_coalesced");
      }
    };
  }
  return collective(
      {OpType::COALESCED, "all_gather_into_tensor_coalesced", both(outputs, inputs), outputs, example, sig,
       refusal.text()},
      on_shm,
      [&]() -> Issued {
        auto host_out = on_host(outputs);
        auto host_in = on_host(inputs);
        return {host_->allgather_into_tensor_coalesced(host_out, host_in, opts), nullptr};
      });
}

// Every rank sends send[q] to rank q and receives recv[q] from it (empty tensors: nothing).
void ProcessGroupNeuron::exchange_on_shm(const TensorList& send, const TensorList& recv) {
  auto s = host_bytes(send), r = host_bytes(recv);
  std::vector<const void*> sp;
  std::vector<void*> rp;
  std::vector<int64_t> sb, rb;
  for (auto& b : s) {
    sp.push_back(b.ptr());
    sb.push_back(b.bytes());
  }
  for (auto& b : r) {
    rp.push_back(b.ptr());
    rb.push_back(b.bytes());
  }
  shm_->exchange(sp, sb, rp, rb);
  write_back(r);
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::gather(TensorLists& outputs, TensorList& inputs,
                                                    const c10d::GatherOptions& opts) {
  auto flat_out = flatten(outputs);  // empty on ranks other than the root
  const auto& example = first(inputs, "gather");
  Refusal refusal("gather");
  refusal.check(args::root(opts.rootRank, size_, "gather")).check(args::no_zero_dim0(inputs));
  if (rank_ == opts.rootRank) {  // only the root has outputs: it tells the others if it refuses them
    refusal.check(outputs.size() == inputs.size() ? "" : "the root needs one list of outputs per input tensor");
    for (size_t i = 0; i < inputs.size() && i < outputs.size(); ++i) {
      refusal.check(args::one_per_rank(outputs[i], size_, "output tensors"))
          .check(args::each_like(outputs[i], inputs[i], "output", "input"));
    }
  }
  auto sig = Sig::of(OpType::GATHER, example, inputs.size(), numel_of(inputs)).with_root(opts.rootRank);
  std::function<void()> on_shm;
  if (shm_ && inputs.size() == 1) {
    on_shm = [&] {
      const bool root = rank_ == opts.rootRank;
      TORCH_CHECK(!root || (outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_),
                  "neuron backend: gather needs ", size_, " output tensors on the root");
      auto none = at::empty({0}, at::TensorOptions().dtype(inputs[0].dtype()));
      TensorList send(size_, none), recv(size_, none);
      send[opts.rootRank] = inputs[0];
      if (root) recv = outputs[0];
      exchange_on_shm(send, recv);
    };
  }
  return collective({OpType::GATHER, "gather", both(flat_out, inputs), flat_out, example, sig, refusal.text()},
                    on_shm,
                    [&]() -> Issued {
                      auto host_out = on_host(outputs);
                      auto host_in = on_host(inputs);
                      return {host_->gather(host_out, host_in, opts), nullptr};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::scatter(TensorList& outputs, TensorLists& inputs,
                                                     const c10d::ScatterOptions& opts) {
  const auto& example = first(outputs, "scatter");
  Refusal refusal("scatter");
  refusal.check(args::root(opts.rootRank, size_, "scatter"));
  if (rank_ == opts.rootRank) {  // only the root has inputs: it tells the others if it refuses them
    refusal.check(inputs.size() == outputs.size() ? "" : "the root needs one list of inputs per output tensor");
    for (size_t i = 0; i < inputs.size() && i < outputs.size(); ++i) {
      refusal.check(args::one_per_rank(inputs[i], size_, "input tensors"))
          .check(args::each_like(inputs[i], outputs[i], "input", "output"));
    }
  }
  auto sig = Sig::of(OpType::SCATTER, example, outputs.size(), numel_of(outputs)).with_root(opts.rootRank);
  std::function<void()> on_shm;
  if (shm_ && outputs.size() == 1) {
    on_shm = [&] {
      const bool root = rank_ == opts.rootRank;
      TORCH_CHECK(!root || (inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_),
                  "neuron backend: scatter needs ", size_, " input tensors on the root");
      auto none = at::empty({0}, at::TensorOptions().dtype(outputs[0].dtype()));
      TensorList send(size_, none), recv(size_, none);
      if (root) send = inputs[0];
      recv[opts.rootRank] = outputs[0];
      exchange_on_shm(send, recv);
    };
  }
  // inputs are empty on ranks other than the root
  return collective({OpType::SCATTER, "scatter", both(outputs, flatten(inputs)), outputs, example, sig,
                     refusal.text()},
                    on_shm,
                    [&]() -> Issued {
                      auto host_out = on_host(outputs);
                      auto host_in = on_host(inputs);
                      return {host_->scatter(host_out, host_in, opts), nullptr};
                    });
}

// reduce_scatter of `size_` chunks (one per rank) into `output`; inputs scaled first for PREMUL_SUM.
void ProcessGroupNeuron::reduce_scatter_on_shm(const at::Tensor& output, const TensorList& chunks,
                                               const HostReduction& plan) {
  TORCH_CHECK(static_cast<int>(chunks.size()) == size_, "neuron backend: reduce_scatter needs ", size_,
              " input tensors (one per rank), got ", chunks.size());
  HostBytes out(output);
  auto ins = host_bytes(plan.scaled_copies(on_host(chunks)));
  std::vector<const void*> ptrs;
  for (auto& i : ins) {
    TORCH_CHECK(i.bytes() == out.bytes(), "neuron backend: reduce_scatter: an input has ", i.dense.numel(),
                " elements of ", i.dense.scalar_type(), ", the output ", out.dense.numel(), " of ",
                out.dense.scalar_type(), "; every input must match the output");
    ptrs.push_back(i.ptr());
  }
  shm_->reduce_scatter(out.ptr(), ptrs, out.dense.numel(), out.dense.scalar_type(), plan.host_op.op_);
  out.write_back();
  if (plan.needs_finish()) plan.finish({out.user});
}

// reduce_scatter takes, per output, either one input per rank (each of the output's shape), or, as
// TorchNeuron, one input holding every rank's part along the scatter dim (the one dim where input and
// output differ: args::single_input_scatter). The second becomes the first here: the input's parts,
// each of the output's shape (views of the input where they can be, else copies; only read).
namespace {
TensorList scatter_parts(const at::Tensor& input, const at::Tensor& output, int64_t dim, int size) {
  auto padded = input.sizes().vec();
  while (static_cast<int64_t>(padded.size()) < output.dim()) padded.insert(padded.begin(), 1);
  auto whole = on_host(input).reshape(padded);
  const int64_t part = whole.size(dim) / size;
  TensorList parts;
  for (int q = 0; q < size; ++q) parts.push_back(whole.narrow(dim, q * part, part).reshape(output.sizes()));
  return parts;
}
} // namespace

c10::intrusive_ptr<Work> ProcessGroupNeuron::reduce_scatter(TensorList& outputs, TensorLists& inputs,
                                                            const c10d::ReduceScatterOptions& opts) {
  auto flat_in = flatten(inputs);
  const auto& example = first(outputs, "reduce_scatter");
  Refusal refusal("reduce_scatter");
  refusal.check(args::reduction(opts.reduceOp))
      .check(outputs.size() == inputs.size() ? "" : "needs one list of inputs per output tensor")
      .check(args::not_empty(both(outputs, flat_in)));
  TensorLists parts(inputs.size());  // per output: one input per rank
  for (size_t i = 0; i < inputs.size() && i < outputs.size(); ++i) {
    if (inputs[i].size() == 1 && inputs[i][0].defined()) {
      int64_t dim = 0;
      refusal.check(args::single_input_scatter(inputs[i][0], outputs[i], size_, &dim));
      if (!refusal.refused()) parts[i] = scatter_parts(inputs[i][0], outputs[i], dim, size_);
    } else {
      refusal.check(args::one_per_rank(inputs[i], size_, "input tensors"))
          .check(args::each_like(inputs[i], outputs[i], "input", "output"));
      parts[i] = inputs[i];
    }
  }
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "reduce_scatter");
  auto sig = Sig::of(OpType::REDUCE_SCATTER, example, outputs.size(), numel_of(outputs) + numel_of(flat_in))
                 .with_reduce(opts.reduceOp.op_);
  std::function<void()> on_shm;
  if (shm_ && outputs.size() == inputs.size() && reducible_in_rank_order(example.scalar_type(), plan.host_op.op_)) {
    on_shm = [&] {
      for (size_t i = 0; i < outputs.size(); ++i) reduce_scatter_on_shm(outputs[i], parts[i], plan);
    };
  }
  return collective({OpType::REDUCE_SCATTER, "reduce_scatter", both(outputs, flat_in), outputs, example, sig,
                     refusal.text()},
                    on_shm, [&]() -> Issued {
                      auto host_out = on_host(outputs);
                      TensorLists host_in;
                      for (const auto& l : parts) {
                        auto scaled = plan.scaled_copies(on_host(l));
                        for (auto& t : scaled) t = t.contiguous();
                        host_in.push_back(std::move(scaled));
                      }
                      auto host_opts = opts;
                      host_opts.reduceOp = plan.host_op;
                      return {host_->reduce_scatter(host_out, host_in, host_opts), finisher(plan, host_out)};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::ReduceScatterOptions& opts) {
  Refusal refusal("reduce_scatter_tensor");
  refusal.check(args::reduction(opts.reduceOp))
      .check(args::not_empty({input, output}))
      .check(args::scattered_input(input, output, size_));
  auto plan = HostReduction::plan(opts.reduceOp, output.scalar_type(), size_, "reduce_scatter_tensor");
  auto sig = Sig::of(OpType::_REDUCE_SCATTER_BASE, output, 1, output.numel() + input.numel())
                 .with_reduce(opts.reduceOp.op_);
  std::function<void()> on_shm;
  if (shm_ && reducible_in_rank_order(output.scalar_type(), plan.host_op.op_)) {
    on_shm = [&] {
      reduce_scatter_on_shm(output, rank_slices(on_host(input).contiguous(), output, "reduce_scatter_tensor"), plan);
    };
  }
  return collective(
      {OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", {output, input}, {output}, input, sig, refusal.text()},
      on_shm,
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
  Refusal refusal("reduce_scatter_tensor_coalesced");
  refusal.check(args::reduction(opts.reduceOp))
      .check(outputs.size() == inputs.size() ? "" : "needs one output per input tensor")
      .check(args::same_trailing_shape(inputs));
  for (size_t i = 0; i < inputs.size() && i < outputs.size(); ++i) {
    refusal.check(args::scattered_input(inputs[i], outputs[i], size_));
  }
  auto plan = HostReduction::plan(opts.reduceOp, example.scalar_type(), size_, "reduce_scatter_tensor_coalesced");
  auto sig = Sig::of(OpType::REDUCE_SCATTER_TENSOR_COALESCED, example, outputs.size(),
                     numel_of(outputs) + numel_of(inputs))
                 .with_reduce(opts.reduceOp.op_);
  std::function<void()> on_shm;
  if (shm_ && outputs.size() == inputs.size() && reducible_in_rank_order(example.scalar_type(), plan.host_op.op_)) {
    on_shm = [&] {
      for (size_t i = 0; i < outputs.size(); ++i) {
        reduce_scatter_on_shm(
            outputs[i], rank_slices(on_host(inputs[i]).contiguous(), outputs[i], "reduce_scatter_tensor_coalesced"),
            plan);
      }
    };
  }
  return collective({OpType::REDUCE_SCATTER_TENSOR_COALESCED, "reduce_scatter_tensor_coalesced",
                     both(outputs, inputs), outputs, example, sig, refusal.text()},
                    on_shm, [&]() -> Issued {
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
  Refusal refusal("all_to_all_single");
  refusal.check(args::even_splits(input, input_split_sizes, size_, "input"))
      .check(args::even_splits(output, output_split_sizes, size_, "output"))
      .check(output.scalar_type() == input.scalar_type()
                 ? ""
                 : c10::str("the output is ", output.scalar_type(), " but the input ", input.scalar_type()));
  std::function<void()> on_shm;
  if (shm_) {
    on_shm = [&] {
      // Blocks along dim 0: equal ones without split sizes, as torch.
      auto blocks = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* what) {
        TORCH_CHECK(t.dim() > 0 || t.numel() == 0, "neuron backend: all_to_all_single needs tensors with a dim 0");
        const int64_t rows = t.dim() > 0 ? t.size(0) : 0;
        std::vector<int64_t> sizes = splits;
        if (sizes.empty()) {
          TORCH_CHECK(rows % size_ == 0, "neuron backend: all_to_all_single: the ", what, "'s dim 0 (", rows,
                      ") must divide by the group size ", size_, " without split sizes");
          sizes.assign(size_, rows / size_);
        }
        TORCH_CHECK(static_cast<int>(sizes.size()) == size_, "neuron backend: all_to_all_single needs ", size_,
                    " ", what, " split sizes, got ", sizes.size());
        TensorList out;
        int64_t at = 0;
        for (int64_t n : sizes) {
          out.push_back(t.narrow(0, at, n));
          at += n;
        }
        TORCH_CHECK(at == rows, "neuron backend: all_to_all_single: the ", what, " split sizes add up to ", at,
                    ", not its dim 0 (", rows, ")");
        return out;
      };
      exchange_on_shm(blocks(input, input_split_sizes, "input"), blocks(output, output_split_sizes, "output"));
    };
  }
  return collective({OpType::ALLTOALL_BASE, "all_to_all_single", {output, input}, {output}, input, sig, refusal.text()},
                    on_shm,
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
  Refusal refusal("all_to_all");
  refusal.check(args::one_per_rank(inputs, size_, "input tensors"))
      .check(args::one_per_rank(outputs, size_, "output tensors"));
  bool all_empty = true;
  for (const auto& t : inputs) all_empty = all_empty && t.numel() == 0;
  if (!all_empty) refusal.check(args::not_empty(inputs));  // nothing to send anywhere is fine
  refusal.check(args::same_shapes(inputs, "input")).check(args::each_like(outputs, example, "output", "input"));
  auto sig = Sig::of(OpType::ALLTOALL, example, inputs.size(), numel_of(inputs));
  std::function<void()> on_shm;
  if (shm_) {
    on_shm = [&] {
      TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
                  "neuron backend: all_to_all needs ", size_, " input and output tensors");
      exchange_on_shm(inputs, outputs);
    };
  }
  return collective({OpType::ALLTOALL, "all_to_all", both(outputs, inputs), outputs, example, sig, refusal.text()},
                    on_shm,
                    [&]() -> Issued {
                      auto host_out = on_host(outputs);
                      auto host_in = on_host(inputs);
                      return {host_->alltoall(host_out, host_in, opts), nullptr};
                    });
}

// Point-to-point between ranks of one host: checked, over shared memory (PointToPoint.h); otherwise, and for
// several tensors at once or any source, on the host backend (paired by tag, unchecked).
c10::intrusive_ptr<Work> ProcessGroupNeuron::send(TensorList& tensors, int dst_rank, int tag) {
  if (p2p_ && tensors.size() == 1) {
    const auto wrong_device = device_refusal(tensors);  // a CPU tensor: raised here, before the message
    TORCH_CHECK(wrong_device.empty(), "neuron backend: send: ", wrong_device);
    return p2p_->send(tensors[0], dst_rank, c10::str(describe("send", tensors[0]), " to rank ", dst_rank));
  }
  return collective({OpType::SEND, "send", tensors, tensors, first(tensors, "send"), std::nullopt}, nullptr,
                    [&]() -> Issued {
                      // the host backend sends contiguous bytes: a strided tensor goes as its contiguous copy
                      TensorList host;
                      for (const auto& t : on_host(tensors)) host.push_back(t.contiguous());
                      return {host_->send(host, dst_rank, tag), nullptr};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::recv(TensorList& tensors, int src_rank, int tag) {
  if (p2p_ && tensors.size() == 1) {
    const auto wrong_device = device_refusal(tensors);  // a CPU tensor: raised here, before the message
    TORCH_CHECK(wrong_device.empty(), "neuron backend: recv: ", wrong_device);
    return p2p_->recv(tensors[0], src_rank, c10::str(describe("recv", tensors[0]), " from rank ", src_rank));
  }
  return collective({OpType::RECV, "recv", tensors, tensors, first(tensors, "recv"), std::nullopt}, nullptr,
                    [&]() -> Issued {
                      // received into contiguous bytes, copied into a strided tensor once they arrived
                      auto views = std::make_shared<std::vector<HostBytes>>(host_bytes(tensors));
                      TensorList host;
                      for (const auto& b : *views) host.push_back(b.dense);
                      return {host_->recv(host, src_rank, tag), [views] {
                                for (auto& b : *views) b.write_back();
                              }};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::recvAnysource(TensorList& tensors, int tag) {
  return collective({OpType::RECVANYSOURCE, "recv (any source)", tensors, tensors, first(tensors, "recv"),
                     std::nullopt},
                    nullptr, [&]() -> Issued {
                      auto host = on_host(tensors);
                      return {host_->recvAnysource(host, tag), nullptr};
                    });
}

c10::intrusive_ptr<Work> ProcessGroupNeuron::barrier(const c10d::BarrierOptions& opts) {
  // The device in opts (barrier(device_ids=[local_rank])) only chose this
  // backend; the host's barrier needs no tensor.
  std::function<void()> on_shm;
  if (shm_) {
    // With the check on, every rank waited in it until all had posted this barrier: that was the
    // barrier (one meeting instead of two). The data path only refuses a broken group then.
    const bool met_in_check = collective_check_mode() != CheckMode::kOff;
    on_shm = [this, met_in_check] { met_in_check ? shm_->check_usable() : shm_->barrier(); };
  }
  return collective({OpType::BARRIER, "barrier", {}, {}, at::Tensor(), Sig::of(OpType::BARRIER, at::Tensor(), 0, -1)},
                    on_shm, [&]() -> Issued { return {host_->barrier(opts), nullptr}; });
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
  if (shm_) shm_->set_timeout(timeout);
  if (p2p_) p2p_->set_timeout(timeout);
}

void ProcessGroupNeuron::setGroupUid(const std::string& pg_uid) {
  c10d::Backend::setGroupUid(pg_uid);
  host_->setGroupUid(pg_uid);
}

} // namespace neuron::distributed
