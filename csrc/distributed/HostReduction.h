// Reductions the host backend cannot run itself, done around it.
//
// Collectives on neuron run in a host backend (gloo) over zero-copy aliases.
// Gloo lacks two reductions that device code relies on: PREMUL_SUM (FSDP2 uses
// it when a gradient divide factor is set) and AVG on integer tensors (NCCL
// divides the integer sum, truncating). Both become a SUM in gloo plus a step
// on the host aliases: scaling the inputs before, or dividing the result after.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>
#include <string>
#include <vector>

namespace neuron::distributed {

struct HostReduction {
  c10d::ReduceOp host_op;         // what the host backend runs
  std::optional<double> premul;   // PREMUL_SUM: multiply every input by this, then sum
  int64_t integer_divisor = 0;    // integer AVG: truncating division of the sum by the group size
  // Integer SUM/AVG: Neuron reduces integers in fp32, exact to 2^24; the sum is checked
  // (aten/native/NeuronDtypeRules.h, TORCHNEURON_INT64). Names the collective.
  const char* checked_integer_sum = nullptr;

  // `collective` names the caller in error messages.
  static HostReduction plan(const c10d::ReduceOp& op, at::ScalarType dtype, int group_size,
                            const char* collective);

  // PREMUL_SUM on a collective whose inputs are its outputs (all_reduce): scale in place.
  void scale_in_place(std::vector<at::Tensor>& host_tensors) const;
  // PREMUL_SUM where inputs are separate from outputs (reduce_scatter): the
  // caller's inputs must stay untouched, so the host reduces scaled copies.
  std::vector<at::Tensor> scaled_copies(const std::vector<at::Tensor>& host_inputs) const;

  bool needs_finish() const { return integer_divisor != 0 || checked_integer_sum != nullptr; }
  // Runs once the host's sum is in `host_outputs`.
  void finish(const std::vector<at::Tensor>& host_outputs) const;
};

} // namespace neuron::distributed
