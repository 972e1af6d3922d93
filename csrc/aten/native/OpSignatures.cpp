// Distinct eager op signatures and the "shapes keep changing" warning (OpSignatures.h).
#include "aten/native/OpSignatures.h"

#include <c10/util/Exception.h>

#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace neuron::op_signatures {
namespace {

struct State {
  std::mutex mu;
  std::unordered_set<uint64_t> seen;
  std::unordered_map<std::string, int64_t> per_op;       // distinct signatures of each op
  std::unordered_map<std::string, int64_t> new_in_step;  // new signatures of each op in this step
  std::unordered_map<const std::string*, int64_t> calls;  // calls per op (names are stable strings)
  int64_t ops_in_window = 0;
  bool optimizer_steps = false;  // steps are optimizer steps from now on
  int64_t steps = 0;
  int64_t growing = 0;  // consecutive steps that added signatures
  bool warned = false;
};

State& state() {
  static auto* s = new State();
  return *s;
}

// Called with the lock held.
void close_step(State& s) {
  ++s.steps;
  s.ops_in_window = 0;
  if (s.new_in_step.empty()) {
    s.growing = 0;
    return;
  }
  if (s.steps > kWarmupSteps) ++s.growing;
  std::string top;
  int64_t top_new = 0;
  for (auto& [op, n] : s.new_in_step)
    if (n > top_new) top = op, top_new = n;
  int64_t total_new = 0;
  for (auto& [op, n] : s.new_in_step) total_new += n;
  s.new_in_step.clear();
  if (s.warned || s.growing < kGrowingSteps) return;
  s.warned = true;
  TORCH_WARN("neuron eager: every step keeps running ops with new input shapes (", s.growing,
             " steps in a row; this one added ", total_new, " new op signatures, most for ", top, ", which has ",
             s.per_op[top], " so far). On Trainium each eager op is compiled once per signature (op, input "
             "shapes, dtypes), so every such step compiles again. Keep shapes fixed: for generate() use "
             "cache_implementation=\"static\"; pad batches to fixed sizes (padding=\"max_length\" or "
             "pad_to_multiple_of). torch_neuronx.get_op_signature_counts() lists the signatures per op.");
}

} // namespace

uint64_t hash_name(const std::string& op) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : op) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

void record(const std::string& op, const Hasher& signature) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  ++s.calls[&op];
  if (s.seen.insert(signature.h).second) {
    ++s.per_op[op];
    ++s.new_in_step[op];
  }
  if (!s.optimizer_steps && ++s.ops_in_window >= kOpsPerWindow) close_step(s);
}

void end_step() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (!s.optimizer_steps) {
    // The ops before the first optimizer step belong to it: restart the count of steps.
    s.optimizer_steps = true;
    s.steps = 0;
    s.growing = 0;
  }
  close_step(s);
}

std::vector<std::pair<std::string, int64_t>> counts() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return {s.per_op.begin(), s.per_op.end()};
}

std::vector<std::pair<std::string, int64_t>> calls() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  std::unordered_map<std::string, int64_t> by_name;  // two stable strings may hold one name
  for (auto& [op, n] : s.calls) by_name[*op] += n;
  return {by_name.begin(), by_name.end()};
}

void reset() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.calls.clear();
  s.seen.clear();
  s.per_op.clear();
  s.new_in_step.clear();
  s.ops_in_window = 0;
  s.optimizer_steps = false;
  s.steps = 0;
  s.growing = 0;
  s.warned = false;
}

} // namespace neuron::op_signatures
