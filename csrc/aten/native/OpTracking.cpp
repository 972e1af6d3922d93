// Op tracking as TorchNeuron reports it (OpTracking.h).
#include "aten/native/OpTracking.h"
#include "aten/native/CompositeRecording.h"
#include "aten/native/SchemaCache.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace neuron::op_tracking {

std::atomic<uint64_t> g_generation{1};
std::atomic<bool> g_reject_cpu_ops{false};

namespace {

thread_local int t_inside_registered_op = 0;

struct State {
  std::mutex mu;
  std::unordered_set<std::string> registered;  // base names
  std::unordered_map<std::string, std::string> reported_as;  // op -> the name Trainium reports it under
  std::set<std::string> executed;
  std::set<std::string> fallback;
};

State& state() {
  static auto* s = new State();
  return *s;
}

std::string base_of(const std::string& op_name) { return op_name.substr(0, op_name.find('.')); }

// The name Trainium reports for what the emulator runs under another name: TorchNeuron's own kernels log
// "aten::empty" and "aten::set_" for every overload, and SDPA's neuron backend there is OVERRIDEABLE
// (the emulator runs the CPU's flash-attention kernel for it).
std::string trainium_name(const std::string& op_name) {
  static const std::unordered_map<std::string, std::string> renamed = {
      {"aten::empty.memory_format", "aten::empty"},
      {"aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_fused_attention_overrideable"},
      {"aten::_scaled_dot_product_flash_attention_for_cpu_backward",
       "aten::_scaled_dot_product_fused_attention_overrideable_backward"},
  };
  auto it = renamed.find(op_name);
  if (it != renamed.end()) return it->second;
  if (base_of(op_name) == "aten::set_") return "aten::set_";
  return op_name;
}

void insert(State& s, const std::string& name) {
  if (!s.registered.count(base_of(name))) {
    s.fallback.insert(name);
    return;
  }
  auto renamed = s.reported_as.find(name);
  s.executed.insert(renamed == s.reported_as.end() ? name : renamed->second);
}

} // namespace

Site::Site(const std::string& op_name, bool always_recorded) : name(trainium_name(op_name)), always(always_recorded) {}

void record_first(Site& site, uint64_t generation) {
  if (t_inside_registered_op && !site.always) return;
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (generation != g_generation.load(std::memory_order_relaxed)) return;  // a clear() in between: next call
  insert(s, site.name);
  site.recorded_in.store(generation, std::memory_order_relaxed);
}

void reject_if_cpu(const Site& site) {
  if (t_inside_registered_op || runs_on_neuron(site.name)) return;
  TORCH_CHECK_NOT_IMPLEMENTED(false, site.name, " has no Neuron kernel in TorchNeuron: on Trainium it runs on the CPU "
                              "(a copy to the host and back), and TORCHNEURON_CPU_FALLBACK=error forbids that. Move this "
                              "computation to the CPU yourself (tensor.cpu()), replace the op, or unset "
                              "TORCHNEURON_CPU_FALLBACK (default: allow). torch_neuronx.get_fallback_ops() lists such ops.");
}

void set_cpu_fallback_allowed(bool allowed) { g_reject_cpu_ops.store(!allowed); }

InsideRegisteredOp::InsideRegisteredOp() { ++t_inside_registered_op; }
InsideRegisteredOp::~InsideRegisteredOp() { --t_inside_registered_op; }

void set_registered_ops(const std::vector<std::string>& base_names,
                        const std::unordered_map<std::string, std::string>& reported_as) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.registered = std::unordered_set<std::string>(base_names.begin(), base_names.end());
  s.reported_as = reported_as;
  s.executed.clear();
  s.fallback.clear();
  g_generation.fetch_add(1, std::memory_order_relaxed);
}

bool runs_on_neuron(const std::string& op_name) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return s.registered.count(base_of(trainium_name(op_name))) > 0;
}

std::vector<std::string> executed_ops() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return {s.executed.begin(), s.executed.end()};
}

std::vector<std::string> fallback_ops() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return {s.fallback.begin(), s.fallback.end()};
}

void clear() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.executed.clear();
  s.fallback.clear();
  g_generation.fetch_add(1, std::memory_order_relaxed);
}

void log_op(const std::string& op_name, bool on_neuron) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  (on_neuron ? s.executed : s.fallback).insert(op_name);
}

// --- Composite ops TorchNeuron registers as one Neuron kernel ---------------------------------------------
//
// Here they decompose before reaching the device (PyTorch's composite kernels), so their parts would be
// recorded instead. Each gets a kernel that records the op and runs the same composite kernel the
// dispatcher would have picked, with recording off for its parts: at PrivateUse1 for explicit composites
// (their autograd formula stays where it is), and at PrivateUse1 and AutogradPrivateUse1 for implicit
// ones (at the autograd key, where the composite runs normally, so autograd records its parts as before;
// at PrivateUse1 for calls under inference_mode, which skip the autograd keys). Calls on fake or
// functional tensors (tracing: the Python key is set) run the composite without recording.
//
// The kernel is the overload's unboxed one (UnboxedComposites.cpp) where this build has it, else the boxed
// one below. (copy_ is recorded by the device copy it always ends in, native::copy_from.)
namespace {

std::unordered_map<const c10::FunctionSchema*, Composite*>& composites() {
  static auto* m = new std::unordered_map<const c10::FunctionSchema*, Composite*>();
  return *m;
}

std::vector<std::string>& boxed_overloads() {
  static auto* v = new std::vector<std::string>();
  return *v;
}

void registered_composite(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  // The map is read-only once registration is done.
  Composite& c = *cached_by_schema<Composite, 64>(
      op, [](const c10::OperatorHandle& op) { return composites().at(&op.schema()); });
  if (!keys.has(c10::DispatchKey::Python)) record(c.site);
  if (c.records_parts) {
    op.callBoxedForDispatchKey(c.kernel, *stack);
    return;
  }
  InsideRegisteredOp inside;
  op.callBoxedForDispatchKey(c.kernel, *stack);
}

} // namespace

int64_t track_registered_composites(const std::vector<std::string>& overloads,
                                    const std::vector<std::string>& records_parts) {
  const std::unordered_set<std::string> parts(records_parts.begin(), records_parts.end());
  static std::unique_ptr<torch::Library> device_lib, autograd_lib;
  if (device_lib) return 0;
  device_lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                                __FILE__, __LINE__);
  autograd_lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                                  c10::DispatchKey::AutogradPrivateUse1, __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  int64_t count = 0;
  for (const std::string& full : overloads) {
    auto dot = full.find('.');
    std::string name = full.substr(0, dot), overload = dot == std::string::npos ? "" : full.substr(dot + 1);
    auto op = dispatcher.findOp(c10::OperatorName(name, overload));
    // An overload this torch does not have, or one with a neuron kernel of ours (it records itself).
    if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    // set_ overloads decompose into set_ kernels of ours, which record "aten::set_" as Trainium does; copy_
    // always ends in the device copy (native::copy_from), which records it.
    if (name == "aten::set_" || name == "aten::copy_") continue;
    c10::DispatchKey kernel;
    if (op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional))
      kernel = c10::DispatchKey::CompositeExplicitAutogradNonFunctional;
    else if (op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd))
      kernel = c10::DispatchKey::CompositeExplicitAutograd;
    else if (op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd))
      kernel = c10::DispatchKey::CompositeImplicitAutograd;
    else
      continue;  // no kernel at all on neuron: nothing runs that could be recorded (e.g. linear_backward)
    auto* composite = new Composite(full, kernel, parts.count(full) > 0);
    const UnboxedComposite* unboxed = find_unboxed_composite(full);
    // An unboxed kernel compiled for another alias key (the op's composite moved, in another torch) would
    // call the wrong kernel: the boxed one calls the one the dispatcher has.
    if (unboxed && unboxed->kernel != kernel) unboxed = nullptr;
    if (unboxed) {
      *unboxed->state = composite;
    } else {
      composites()[&op->schema()] = composite;
      boxed_overloads().push_back(full);
    }
    auto fn = [unboxed] {
      return unboxed ? unboxed->make() : torch::CppFunction::makeFromBoxedFunction<&registered_composite>();
    };
    std::string qualified = name.substr(6) + (overload.empty() ? "" : "." + overload);
    device_lib->impl(qualified.c_str(), fn());
    // An implicit composite with an autograd formula of its own (_fused_rms_norm: its backward is
    // _fused_rms_norm_backward) keeps the formula: its autograd key runs it, then the composite here. Not
    // linear: its formula (linear_backward) is PyTorch's for nested tensors, and dense linear's gradients
    // come from its parts on CPU (the composite runs at AutogradCPU), so they do here.
    if (kernel == c10::DispatchKey::CompositeImplicitAutograd &&
        (!op->hasKernelForDispatchKey(c10::DispatchKey::Autograd) || full == "aten::linear"))
      autograd_lib->impl(qualified.c_str(), fn());
    ++count;
  }
  return count;
}

std::vector<std::string> boxed_composite_recorders() { return boxed_overloads(); }

} // namespace neuron::op_tracking
