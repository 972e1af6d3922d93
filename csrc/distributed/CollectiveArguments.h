// The arguments the Neuron collectives refuse, as TorchNeuron's ProcessGroupNeuron does.
//
// On Trainium, TorchNeuron's backend (torch_neuronx/distributed/backend.py and the collective ops
// under python_ops/xla_ops, April 2026 source) raises before any data moves for: a root rank
// outside the group; a reduction the collective engine does not have (it reduces with add, min and
// max: SUM, AVG, MIN, MAX, and PREMUL_SUM as a scale then SUM; PRODUCT, BAND, BOR, BXOR are
// refused); empty tensors where a collective needs data (all_reduce, reduce, the gathers, the
// reduce-scatters, all_to_all); lists whose length is not the group size; outputs whose shape or
// dtype does not match the inputs; uneven all_to_all splits. Passing them to gloo instead would
// silently corrupt data (a broadcast from root 999 zeroed the tensor on every rank) or abort a
// process from gloo's I/O thread.
//
// Each check returns "" when the arguments are fine, else the message to raise (the collective, what
// is wrong, and the fix). Some arguments exist on one rank only (scatter's inputs and gather's
// outputs live on the root), so ProcessGroupNeuron does not raise them on the spot: a refusing rank
// tells the others through the pre-collective check (CollectiveCheck.h), and every rank raises.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>
#include <string>
#include <vector>

namespace neuron::distributed::arguments {

using TensorList = std::vector<at::Tensor>;

// The first refusal of a call: checks are chained with `check(...)` and only the first failing one speaks.
class Refusal {
 public:
  explicit Refusal(const char* collective) : collective_(collective) {}
  // Records `message` ("" = fine) unless an earlier check refused already.
  Refusal& check(const std::string& message);
  bool refused() const { return !message_.empty(); }
  // "neuron backend: <collective>: <message>", or "" when nothing was refused
  std::string text() const;

 private:
  const char* collective_;
  std::string message_;
};

// rootRank within the group: 0 .. size-1.
std::string root(int64_t root_rank, int size, const char* collective);
// SUM, AVG, MIN, MAX and PREMUL_SUM.
std::string reduction(const c10d::ReduceOp& op);
// No tensor without elements (all_reduce, reduce, reduce_scatter): "tensors cannot be empty".
std::string not_empty(const TensorList& tensors);
// No tensor with a zero-sized dim 0 (the gathers): "tensors cannot have zero size in dimension 0".
std::string no_zero_dim0(const TensorList& tensors);
// Exactly `size` tensors in a list (one per rank); `what` names the list ("output tensors").
std::string one_per_rank(const TensorList& tensors, int size, const char* what);
// Every tensor of `tensors` has the first's shape (all_to_all): "all input tensors must have same shape".
std::string same_shapes(const TensorList& tensors, const char* what);
// Every tensor of `tensors` has `like`'s shape and dtype; `what` names them ("output", "input").
std::string each_like(const TensorList& tensors, const at::Tensor& like, const char* what, const char* like_what);
// all_gather_into_tensor: `output` holds `size` x `input`'s elements of `input`'s dtype.
std::string gathered_output(const at::Tensor& output, const at::Tensor& input, int size);
// reduce_scatter_tensor: `input` holds `size` x `output`'s elements of `output`'s dtype.
std::string scattered_input(const at::Tensor& input, const at::Tensor& output, int size);
// reduce_scatter with one input tensor (TorchNeuron's single-tensor form): `input` and `output` (the
// shorter shape padded with leading 1s) differ in one dim, where the input holds `size` x the
// output's size; identical shapes need a group of one. "" and `*dim` = that dim (0 when identical).
std::string single_input_scatter(const at::Tensor& input, const at::Tensor& output, int size, int64_t* dim);
// reduce_scatter_tensor_coalesced: every input has the first's shape except in dim 0.
std::string same_trailing_shape(const TensorList& inputs);
// all_to_all_single: no split sizes, or `size` equal ones that add up to dim 0; dim 0 divisible by `size`.
std::string even_splits(const at::Tensor& t, const std::vector<int64_t>& splits, int size, const char* what);

} // namespace neuron::distributed::arguments
