// Op tracking as TorchNeuron reports it: torch_neuronx.get_executed_ops() (ops a NeuronCore would run)
// and get_fallback_ops() (ops that would run on the CPU), each a set of op names since the last
// clear_op_tracking().
//
// On Trainium an op runs on the NeuronCore when TorchNeuron registers a Neuron kernel for it; every
// other op takes its boxed CPU fallback. The classification is by that registered set (the real plugin's
// ATen op names, torch_neuronx/registered_ops.py), given from Python at import: an op whose ATen name
// (without overload) is in it is executed, any other op falls back. What is recorded is what Trainium
// would run, not the emulator's own path: an op TorchNeuron registers as one Neuron kernel is recorded
// as itself and the ops it decomposes into here are not (InsideRegisteredOp); composite ops it registers
// (linear, embedding, ones, clone, _to_copy, ...) get a recording kernel in front of their composite
// (track_registered_composites; unboxed, UnboxedComposites.cpp). Views, _copy_from_and_resize and record_stream are not recorded, as there.
//
// Cost on the eager path: record() of a site already recorded since the last clear is two relaxed
// loads; the first record of a site takes a lock.
#pragma once

#include <c10/core/DispatchKeySet.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace neuron::op_tracking {

// One op as a recording place knows it: its name as Trainium reports it (trainium_name). Made once per
// kernel of ours (a static) or per op of the boxed fallback, never destroyed.
struct Site {
  // `always`: recorded inside registered ops too (allocation and copy: TorchNeuron's C++ kernels log every call).
  explicit Site(const std::string& op_name, bool always = false);
  Site(const Site&) = delete;
  Site& operator=(const Site&) = delete;
  const std::string name;
  const bool always;
  std::atomic<uint64_t> recorded_in{0};  // the tracking generation it was last recorded in
};

// Bumped by clear(): every site records again once.
extern std::atomic<uint64_t> g_generation;
// TORCHNEURON_CPU_FALLBACK=error: an op that runs on the CPU on Trainium raises instead of running.
extern std::atomic<bool> g_reject_cpu_ops;

void record_first(Site& site, uint64_t generation);
void reject_if_cpu(const Site& site);

// Records one call of the op (and, under TORCHNEURON_CPU_FALLBACK=error, rejects an op Trainium runs on the CPU).
inline void record(Site& site) {
  const uint64_t generation = g_generation.load(std::memory_order_relaxed);
  if (site.recorded_in.load(std::memory_order_relaxed) != generation) record_first(site, generation);
  if (g_reject_cpu_ops.load(std::memory_order_relaxed)) reject_if_cpu(site);
}

// While one is alive on a thread, nothing is recorded there: the ops a registered op runs here are
// parts of one Neuron kernel on Trainium.
struct InsideRegisteredOp {
  InsideRegisteredOp();
  ~InsideRegisteredOp();
  InsideRegisteredOp(const InsideRegisteredOp&) = delete;
  InsideRegisteredOp& operator=(const InsideRegisteredOp&) = delete;
};

// The ATen base names ("aten::linear") TorchNeuron registers Neuron kernels for, and the ops reported under
// another name on Trainium (a structured in-place op without a kernel there runs its registered out=
// overload: "aten::tril_" is reported as "aten::tril.out"). Forgets what was recorded.
void set_registered_ops(const std::vector<std::string>& base_names,
                        const std::unordered_map<std::string, std::string>& reported_as = {});
void set_cpu_fallback_allowed(bool allowed);  // TORCHNEURON_CPU_FALLBACK
// Whether an op ("aten::add.Tensor" or "aten::add") runs on the NeuronCore on Trainium.
bool runs_on_neuron(const std::string& op_name);

std::vector<std::string> executed_ops();
std::vector<std::string> fallback_ops();
void clear();
// Records an op by name, from Python (torch_neuronx.utils.log_executed_op / log_offloaded_op: custom ops).
void log_op(const std::string& op_name, bool on_neuron);

// Registers a recording kernel in front of the composite of each of these overloads ("aten::linear")
// that has no neuron kernel of ours; returns how many. Those in `records_parts` (registered as Python
// functions that call other ops) record the ops they run too. Called once, after every other registration.
int64_t track_registered_composites(const std::vector<std::string>& overloads,
                                    const std::vector<std::string>& records_parts);
// The overloads among them whose recording kernel is the boxed one (no unboxed kernel compiled for them:
// UnboxedComposites.cpp); the others' are unboxed.
std::vector<std::string> boxed_composite_recorders();

// A kernel of ours for an op TorchNeuron runs as one Neuron kernel, which computes it here from other ops
// (linear_backward, batch_norm_stats, ...): records the op, not its parts. `records_parts`: an op TorchNeuron
// registers as a Python function calling other ops (rms_norm), whose ops are recorded too. Calls on fake or
// functional tensors (tracing: the Python key is set) record nothing. Register with NEURON_RECORDED_KERNEL.
template <class Signature>
struct RecordedKernel;
template <class R, class... Args>
struct RecordedKernel<R(Args...)> {
  template <R (*kernel)(Args...), const char* name, bool records_parts = false>
  static R call(c10::DispatchKeySet keys, Args... args) {
    static Site site(name);
    if (!keys.has(c10::DispatchKey::Python)) record(site);
    if constexpr (records_parts) {
      return kernel(args...);
    } else {
      InsideRegisteredOp inside;
      return kernel(args...);
    }
  }
};

} // namespace neuron::op_tracking

// `fn` as the kernel of op `name` (a constexpr char array: "aten::linear_backward"), recording it.
#define NEURON_RECORDED_KERNEL(fn, name) \
  TORCH_FN((::neuron::op_tracking::RecordedKernel<decltype(fn)>::call<&fn, name>))
#define NEURON_RECORDED_KERNEL_WITH_PARTS(fn, name) \
  TORCH_FN((::neuron::op_tracking::RecordedKernel<decltype(fn)>::call<&fn, name, true>))

// Records the calling kernel's op once per tracking generation: one static Site per call site.
#define NEURON_TRACK_OP(op_name)                                          \
  do {                                                                    \
    static ::neuron::op_tracking::Site neuron_track_site_(op_name);       \
    ::neuron::op_tracking::record(neuron_track_site_);                    \
  } while (0)
// The same for an allocation or copy kernel: recorded inside registered ops too.
#define NEURON_TRACK_ALLOCATION(op_name)                                  \
  do {                                                                    \
    static ::neuron::op_tracking::Site neuron_track_site_(op_name, true); \
    ::neuron::op_tracking::record(neuron_track_site_);                    \
  } while (0)
