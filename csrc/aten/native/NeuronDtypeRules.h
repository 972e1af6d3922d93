// Neuron's data-type rules, applied to the results of eager ops on `neuron`.
//
// NeuronCores have no int64 and no fp64 datapath: TorchNeuron stores int64 as
// int32 and float64 as float32, and matmul, scatter-add, sum and the reducing
// collectives compute integers in fp32 (exact only up to 2^24). A job whose
// integers leave those ranges is silently wrong on Trainium; the emulator names
// the op and the value instead (torch_neuronx/dtypes.py documents the switches).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace neuron {

// TORCHNEURON_FP64: 0 exact (host float64), 1 exact + warn once, 2 error,
// 3 float32 (default: results rounded to float32 precision, as stored on Neuron).
enum Fp64Mode : int { kFp64Exact = 0, kFp64Warn = 1, kFp64Error = 2, kFp64AsFloat32 = 3 };
void set_fp64_mode(int mode);
int fp64_mode();

namespace dtype_rules {

// TORCHNEURON_INT64: 0 exact (host int64), 1 error at the op, 2 warn once per op (default; dtypes.py says why).
enum Int64Mode : int { kIntExact = 0, kIntError = 1, kIntWarn = 2 };
void set_int64_mode(int mode);

extern std::atomic<int> g_int64_mode;
extern std::atomic<int> g_fp64_mode;

// Largest integer magnitude fp32 holds exactly.
constexpr int64_t kFp32ExactInt = int64_t{1} << 24;

// Ops whose integer results Neuron computes in fp32 (matmul, scatter-add, sum, ...), by
// their name without overload ("aten::mm").
bool computes_integers_in_fp32(const std::string& op_name);

// The rules are eager-mode rules: a compiled graph (torch.compile) runs without them. On Trainium
// neuronx-cc lowers the whole graph; here Inductor's code calls ATen ops that are artifacts of our
// compiler (e.g. its dropout seeds, a randint over the whole int64 range), not the user's ops.
// Set by torch_neuronx/compile/launch.py around each compiled graph, on the calling thread.
extern thread_local bool t_in_compiled_graph;

// True when a result of this dtype has a rule to apply (one relaxed load, no work for float ops).
inline bool result_has_rule(c10::ScalarType dtype) {
  if (dtype == c10::kDouble)
    return g_fp64_mode.load(std::memory_order_relaxed) == kFp64AsFloat32 && !t_in_compiled_graph;
  if (dtype == c10::kLong || dtype == c10::kInt)
    return g_int64_mode.load(std::memory_order_relaxed) != kIntExact && !t_in_compiled_graph;
  return false;
}

// Marks the calling thread as running a compiled graph (or not); returns the previous state.
bool set_in_compiled_graph(bool in_graph);

// Applies the rules to one result of `op` (a host tensor over the result's memory):
// int64 outside int32 and fp32-datapath integers beyond 2^24 raise (or warn);
// float64 is rounded to float32 precision in place.
void apply_to_result(const std::string& op, const at::Tensor& host_result, bool fp32_integer_datapath);

// Inputs of an op under TORCHNEURON_FP64=error|warn.
void check_fp64_input(const std::string& op, const at::Tensor& t);

// NEURON_RT_STOCHASTIC_ROUNDING_EN: fp32 -> bf16 conversions on the device round stochastically.
void set_stochastic_rounding(bool enabled);
bool stochastic_rounding();
// dst (bf16) = src (fp32) rounded stochastically with bits from `host_engine` (a CPU generator).
void stochastic_round_to_bf16(const at::Tensor& dst_host, const at::Tensor& src_host, const at::Generator& host_engine);

} // namespace dtype_rules
} // namespace neuron
