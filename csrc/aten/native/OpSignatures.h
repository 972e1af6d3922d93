// Eager op signatures: on Trainium each eager op is compiled once per signature
// (op, input shapes, dtypes) and cached, so a loop whose shapes keep changing
// compiles again at every step. This counts the distinct signatures an eager run
// would compile and warns once when successive steps keep adding new ones.
//
// A step ends at each optimizer step (torch_neuronx/ops_report.py registers the
// hook); until the first optimizer step, at the end of each top-level module call
// (a model's forward: one generated token, one eval batch), and in code that calls
// no module, every kOpsPerWindow ops.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace neuron::op_signatures {

constexpr int64_t kOpsPerWindow = 1000;
// Steps whose new signatures are expected (first compiles, optimizer state) before the rule watches.
constexpr int64_t kWarmupSteps = 2;
// Consecutive steps adding new signatures that trigger the warning.
constexpr int64_t kGrowingSteps = 3;

struct Hasher {
  uint64_t h;
  explicit Hasher(uint64_t op_hash) : h(op_hash) {}
  void mix(uint64_t v) { h = (h ^ v) * 0x100000001b3ULL; }
  void add(const at::Tensor& t) {
    if (!t.defined()) {
      mix(0x9e37);
      return;
    }
    mix(static_cast<uint64_t>(t.scalar_type()) + 1);
    for (int64_t s : t.sizes()) mix(static_cast<uint64_t>(s) + 0x51);
    mix(0xd1);
  }
};

// One op as the counter knows it: its name, the name's hash (where each of its signatures starts) and its
// calls. Made once per op (the fallback's op registry, a static per host kernel) and never destroyed;
// it registers itself, so calls() finds it.
struct Op {
  explicit Op(std::string op_name);
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;
  const std::string name;
  const uint64_t name_hash;
  std::atomic<int64_t> calls{0};  // every call a NeuronCore would run
};

// Records one call of `op` with this signature. On every eager op's path, so it takes no lock unless the
// signature is new to the calling thread (the first call of each signature), or a window ends.
void record(Op& op, const Hasher& signature);
// The end of a step (optimizer step); module calls and windows of kOpsPerWindow ops stop counting once
// this is called.
void end_step();
// The end of a top-level module call: the end of a step until the first optimizer step; windows of
// kOpsPerWindow ops stop once this is called.
void end_module_call();

std::vector<std::pair<std::string, int64_t>> counts();  // distinct signatures per op
std::vector<std::pair<std::string, int64_t>> calls();   // calls per op (the ops' counters, summed by name)
void reset();

} // namespace neuron::op_signatures
