// Distinct eager op signatures and the "shapes keep changing" warning (OpSignatures.h).
#include "aten/native/OpSignatures.h"

#include <c10/util/Exception.h>

#include <array>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace neuron::op_signatures {
namespace {

// The signatures seen and the step rule, under `mu`; the fast path of record() reads only the atomics.
struct State {
  std::mutex mu;
  std::unordered_set<uint64_t> seen;
  std::unordered_map<std::string, int64_t> per_op;       // distinct signatures of each op
  std::unordered_map<std::string, int64_t> new_in_step;  // new signatures of each op in this step
  std::atomic<int64_t> ops_in_window{0};
  std::atomic<bool> optimizer_steps{false};  // steps are optimizer steps from now on
  std::atomic<bool> module_steps{false};     // until then, steps are top-level module calls (not windows)
  std::atomic<uint64_t> generation{1};       // bumped by reset(): threads forget the signatures they know
  int64_t steps = 0;
  int64_t growing = 0;  // consecutive steps that added signatures
  bool warned = false;
  std::vector<Op*> ops;  // every Op, for calls() and reset()
};

// The signatures the calling thread knows to be in State::seen: a two-way set-associative cache, so an op
// whose signature was seen before costs two compares, not a locked hash-set lookup (which, with the step's
// tensors between two calls, missed the CPU caches: ~0.3 us per op). A miss only takes the lock.
struct KnownSignatures {
  uint64_t generation = 0;
  std::array<uint64_t, 2048> slots{};  // pairs of ways; 0: empty (a signature hashing to 0 always takes the lock)
};
thread_local KnownSignatures t_known;

State& state() {
  static auto* s = new State();
  return *s;
}

// Called with the lock held.
void close_step(State& s) {
  ++s.steps;
  s.ops_in_window.store(0, std::memory_order_relaxed);
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

Op::Op(std::string op_name) : name(std::move(op_name)), name_hash(hash_name(name)) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.ops.push_back(this);
}

void record(Op& op, const Hasher& signature) {
  op.calls.fetch_add(1, std::memory_order_relaxed);
  State& s = state();
  const uint64_t h = signature.h;
  KnownSignatures& known = t_known;
  const uint64_t generation = s.generation.load(std::memory_order_acquire);
  if (known.generation != generation) {
    known.slots.fill(0);
    known.generation = generation;
  }
  uint64_t* ways = &known.slots[2 * ((h ^ (h >> 32)) % (known.slots.size() / 2))];
  if ((ways[0] != h && ways[1] != h) || h == 0) {
    std::lock_guard<std::mutex> g(s.mu);
    if (s.seen.insert(h).second) {
      ++s.per_op[op.name];
      ++s.new_in_step[op.name];
    }
    ways[1] = ways[0];
    ways[0] = h;
  }
  if (!s.optimizer_steps.load(std::memory_order_relaxed) && !s.module_steps.load(std::memory_order_relaxed) &&
      s.ops_in_window.fetch_add(1, std::memory_order_relaxed) + 1 >= kOpsPerWindow) {
    std::lock_guard<std::mutex> g(s.mu);
    if (!s.optimizer_steps.load(std::memory_order_relaxed) &&
        s.ops_in_window.load(std::memory_order_relaxed) >= kOpsPerWindow)
      close_step(s);
  }
}

void end_step() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (!s.optimizer_steps.load(std::memory_order_relaxed)) {
    // The ops before the first optimizer step belong to it: restart the count of steps.
    s.optimizer_steps.store(true, std::memory_order_relaxed);
    s.steps = 0;
    s.growing = 0;
  }
  close_step(s);
}

void end_module_call() {
  State& s = state();
  if (s.optimizer_steps.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> g(s.mu);
  if (s.optimizer_steps.load(std::memory_order_relaxed)) return;
  if (!s.module_steps.load(std::memory_order_relaxed)) {
    // The ops before the first module call's end belong to it: restart the count of steps.
    s.module_steps.store(true, std::memory_order_relaxed);
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
  std::unordered_map<std::string, int64_t> by_name;  // two Ops may hold one name (a host kernel and the fallback)
  for (Op* op : s.ops)
    if (int64_t n = op->calls.load(std::memory_order_relaxed)) by_name[op->name] += n;
  return {by_name.begin(), by_name.end()};
}

void reset() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  for (Op* op : s.ops) op->calls.store(0, std::memory_order_relaxed);
  s.seen.clear();
  s.generation.fetch_add(1, std::memory_order_release);
  s.per_op.clear();
  s.new_in_step.clear();
  s.ops_in_window.store(0, std::memory_order_relaxed);
  s.optimizer_steps.store(false, std::memory_order_relaxed);
  s.module_steps.store(false, std::memory_order_relaxed);
  s.steps = 0;
  s.growing = 0;
  s.warned = false;
}

} // namespace neuron::op_signatures
