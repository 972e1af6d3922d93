// Neuron's data-type rules (NeuronDtypeRules.h): integer ranges, float64 as
// float32, bf16 stochastic rounding.
#include "aten/native/NeuronDtypeRules.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <unordered_set>

namespace neuron {
namespace dtype_rules {

std::atomic<int> g_int64_mode{kIntWarn};
std::atomic<int> g_fp64_mode{kFp64AsFloat32};
thread_local bool t_in_compiled_graph = false;

bool set_in_compiled_graph(bool in_graph) {
  bool previous = t_in_compiled_graph;
  t_in_compiled_graph = in_graph;
  return previous;
}
namespace {
std::atomic<bool> g_stochastic_rounding{false};

struct Extremes {
  int64_t min = 0, max = 0;
};

template <typename T>
Extremes extremes_of(const at::Tensor& contiguous) {
  const T* p = contiguous.const_data_ptr<T>();
  const int64_t n = contiguous.numel();
  T lo = p[0], hi = p[0];
  for (int64_t i = 1; i < n; ++i) {  // one vectorizable pass, no dispatch
    lo = p[i] < lo ? p[i] : lo;
    hi = p[i] > hi ? p[i] : hi;
  }
  return {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

Extremes extremes(const at::Tensor& t) {
  at::Tensor c = t.is_contiguous() ? t : t.contiguous();
  return t.scalar_type() == at::kLong ? extremes_of<int64_t>(c) : extremes_of<int32_t>(c);
}

// One warning per op and rule under TORCHNEURON_INT64=warn, counted afresh each time the mode is set.
std::mutex g_warned_mu;
std::unordered_set<std::string>* g_warned = new std::unordered_set<std::string>();  // never destroyed

bool first_warning(const std::string& key) {
  std::lock_guard<std::mutex> g(g_warned_mu);
  return g_warned->insert(key).second;
}

void report(const std::string& op, const std::string& message) {
  if (g_int64_mode.load(std::memory_order_relaxed) == kIntWarn) {
    if (first_warning(op + message.substr(0, 40))) TORCH_WARN(message);
    return;
  }
  TORCH_CHECK(false, message);
}

const char* const kFix =
    " Set TORCHNEURON_INT64=error to stop at every such op (to find them all), or TORCHNEURON_INT64=exact "
    "to compute with host int64 without checks (the job is still wrong on Trainium if it uses the value).";

void check_integers(const std::string& op, const at::Tensor& t, bool fp32_datapath) {
  if (t.numel() == 0 || t.is_meta()) return;
  const bool is_long = t.scalar_type() == at::kLong;
  if (!is_long && !fp32_datapath) return;
  Extremes e = extremes(t);
  if (fp32_datapath && (e.max > kFp32ExactInt || e.min < -kFp32ExactInt)) {
    int64_t value = e.max > kFp32ExactInt ? e.max : e.min;
    report(op, c10::str(op, " on neuron produced ", value, " in a ", t.scalar_type(),
                        " result: Neuron has no integer datapath for matmul, scatter-add, sum and reducing "
                        "collectives and computes them in fp32, exact only up to 2^24 = ", kFp32ExactInt,
                        ", so on Trainium this value would be silently rounded. Keep such integer results "
                        "within +-2^24 (or compute them in float32 / on the CPU knowingly).",
                        kFix));
    return;
  }
  if (is_long && (e.max > std::numeric_limits<int32_t>::max() || e.min < std::numeric_limits<int32_t>::min())) {
    int64_t value = e.max > std::numeric_limits<int32_t>::max() ? e.max : e.min;
    report(op, c10::str(op, " on neuron produced ", value,
                        " in an int64 result: Neuron has no int64 datapath (TorchNeuron stores int64 as "
                        "int32), so on Trainium this value would be silently truncated. Keep integer values "
                        "within the int32 range [-2147483648, 2147483647] (e.g. keep large counters, "
                        "hashes or seeds on the CPU).",
                        kFix));
  }
}

} // namespace

void set_int64_mode(int mode) {
  {
    std::lock_guard<std::mutex> g(g_warned_mu);
    g_warned->clear();
  }
  g_int64_mode.store(mode);
}

bool computes_integers_in_fp32(const std::string& op_name) {
  // AWS: matmul, scatter-add, all-reduce and reduce-scatter have no integer datapath. Sums and
  // cumulative sums reduce on the same fp32 engines (our reading; docs/fidelity.md).
  static const std::unordered_set<std::string> ops = {
      "aten::mm", "aten::bmm", "aten::addmm", "aten::addmm_", "aten::addbmm", "aten::addbmm_",
      "aten::baddbmm", "aten::baddbmm_", "aten::mv", "aten::addmv", "aten::addmv_", "aten::dot",
      "aten::vdot", "aten::matmul", "aten::_int_mm", "aten::tensordot", "aten::einsum",
      "aten::scatter_add", "aten::scatter_add_", "aten::scatter_reduce", "aten::scatter_reduce_",
      "aten::index_add", "aten::index_add_", "aten::sum", "aten::nansum", "aten::cumsum",
      "aten::cumsum_", "aten::embedding_bag", "aten::_embedding_bag", "aten::bincount"};
  return ops.count(op_name) > 0;
}

void apply_to_result(const std::string& op, const at::Tensor& t, bool fp32_integer_datapath) {
  if (!t.defined() || t.layout() != at::kStrided) return;
  auto dtype = t.scalar_type();
  if (dtype == at::kDouble) {
    if (g_fp64_mode.load(std::memory_order_relaxed) != kFp64AsFloat32 || t.numel() == 0) return;
    TORCH_WARN_ONCE("float64 on neuron (first seen at ", op, "): Neuron has no fp64 datapath and "
                    "TorchNeuron stores float64 as float32, so the emulator rounds every float64 result to "
                    "float32 precision, as on Trainium. Cast to float32 yourself to silence this, set "
                    "TORCHNEURON_FP64=exact for host float64 precision, or TORCHNEURON_FP64=error to find "
                    "every float64 op.");
    at::Tensor writable = t;
    writable.copy_(t.to(at::kFloat));
    return;
  }
  if (g_int64_mode.load(std::memory_order_relaxed) == kIntExact) return;
  if (dtype == at::kLong || dtype == at::kInt) check_integers(op, t, fp32_integer_datapath);
}

void check_fp64_input(const std::string& op, const at::Tensor& t) {
  if (!t.defined() || t.scalar_type() != at::kDouble) return;
  int mode = g_fp64_mode.load(std::memory_order_relaxed);
  TORCH_CHECK(mode != kFp64Error, "float64 is not supported by NeuronCores (", op,
              " got a float64 tensor) and TORCHNEURON_FP64=error is set. Cast to float32 "
              "(tensor.float()) or bfloat16, or set TORCHNEURON_FP64=float32 (the default: rounded to "
              "float32 precision, as on Trainium) or =exact (host float64).");
  if (mode == kFp64Warn) {
    TORCH_WARN_ONCE("float64 op ", op, " on neuron: NeuronCores have no fp64 datapath (TorchNeuron stores "
                    "float64 as float32); TORCHNEURON_FP64=warn computes it on the host in full precision. "
                    "Set TORCHNEURON_FP64=error to catch these, or cast to float32.");
  }
}

void set_stochastic_rounding(bool enabled) { g_stochastic_rounding.store(enabled); }
bool stochastic_rounding() { return g_stochastic_rounding.load(std::memory_order_relaxed); }

// Stochastic rounding of an fp32 value to bf16: add 16 random bits below the bf16 mantissa and
// truncate, so a value rounds up with probability equal to its distance from the lower neighbour
// (in units of the bf16 spacing). NaN stays NaN; the sign is untouched (magnitude rounding).
void stochastic_round_to_bf16(const at::Tensor& dst, const at::Tensor& src, const at::Generator& engine) {
  at::Tensor s = src.contiguous();
  const int64_t n = s.numel();
  at::Tensor out = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
  const float* in = s.const_data_ptr<float>();
  auto* bits_out = reinterpret_cast<uint16_t*>(out.mutable_data_ptr<at::BFloat16>());
  auto* gen = at::check_generator<at::CPUGeneratorImpl>(engine);
  std::lock_guard<std::mutex> lock(gen->mutex_);
  uint32_t random = 0;
  for (int64_t i = 0; i < n; ++i) {
    if ((i & 1) == 0) random = gen->random();
    uint32_t noise = (i & 1) ? (random >> 16) : (random & 0xFFFFu);
    uint32_t bits;
    std::memcpy(&bits, &in[i], sizeof bits);
    if (std::isnan(in[i])) {
      bits_out[i] = static_cast<uint16_t>((bits >> 16) | 0x0040u);  // a quiet NaN of the same sign
      continue;
    }
    uint32_t magnitude = bits & 0x7FFFFFFFu;
    if (magnitude < 0x7F800000u) magnitude += noise;  // infinities stay infinite
    bits_out[i] = static_cast<uint16_t>(((bits & 0x80000000u) | magnitude) >> 16);
  }
  if (!out.is_same(dst)) {
    at::Tensor writable = dst;
    writable.copy_(out);
  }
}

} // namespace dtype_rules

void set_fp64_mode(int mode) { dtype_rules::g_fp64_mode.store(mode); }
int fp64_mode() { return dtype_rules::g_fp64_mode.load(std::memory_order_relaxed); }

} // namespace neuron
