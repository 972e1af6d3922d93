#include "distributed/CollectiveArguments.h"

#include <algorithm>
#include <sstream>

namespace neuron::distributed::arguments {
namespace {

std::string shape(const at::Tensor& t) { return c10::str(t.sizes()); }

const char* reduce_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

} // namespace

Refusal& Refusal::check(const std::string& message) {
  if (message_.empty()) message_ = message;
  return *this;
}

std::string Refusal::text() const {
  return refused() ? c10::str("neuron backend: ", collective_, ": ", message_) : std::string();
}

std::string root(int64_t root_rank, int size, const char* collective) {
  if (root_rank >= 0 && root_rank < size) return "";
  return c10::str("Invalid rootRank ", root_rank, " for ", collective, " with world size ", size,
                  ": the root is a rank of the group, 0..", size - 1,
                  " (for a subgroup, pass group_src=/group_dst=, or a global rank that belongs to it)");
}

std::string reduction(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX:
    case c10d::ReduceOp::PREMUL_SUM:
      return "";
    default:
      return c10::str("unsupported reduce operation '", reduce_name(op.op_),
                      "', supported ops: ['SUM', 'AVG', 'MIN', 'MAX'] (and PREMUL_SUM: a scale, then SUM). The Neuron "
                      "collective engine reduces with add, min and max only; for 0/1 flags use MIN for AND and MAX "
                      "for OR, for a product all_reduce the logarithms with SUM");
  }
}

std::string not_empty(const TensorList& tensors) {
  std::vector<int64_t> empty;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].defined() && tensors[i].numel() == 0) empty.push_back(static_cast<int64_t>(i));
  }
  if (empty.empty()) return "";
  std::ostringstream indices;
  for (size_t i = 0; i < empty.size(); ++i) indices << (i ? ", " : "[") << empty[i];
  indices << "]";
  return c10::str("tensors cannot be empty, found empty tensors at indices: ", indices.str(),
                  ". Skip the collective for a tensor without elements (on every rank alike)");
}

std::string no_zero_dim0(const TensorList& tensors) {
  std::ostringstream found;
  bool any = false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (t.defined() && t.dim() > 0 && t.size(0) == 0) {
      found << (any ? ", " : "") << "tensor[" << i << "]: " << shape(t);
      any = true;
    }
  }
  if (!any) return "";
  return c10::str("tensors cannot have zero size in dimension 0, found: ", found.str(),
                  ". Skip the collective for a tensor without elements (on every rank alike)");
}

std::string one_per_rank(const TensorList& tensors, int size, const char* what) {
  if (static_cast<int>(tensors.size()) == size) return "";
  return c10::str("number of ", what, " (", tensors.size(), ") must equal world size (", size,
                  "): one per rank of the group");
}

std::string same_shapes(const TensorList& tensors, const char* what) {
  for (const auto& t : tensors) {
    if (t.defined() && tensors[0].defined() && t.sizes() != tensors[0].sizes()) {
      return c10::str("all ", what, " tensors must have same shape, but found ", shape(tensors[0]), " and ", shape(t),
                      ": send blocks of one shape (pad them to the largest)");
    }
  }
  return "";
}

std::string each_like(const TensorList& tensors, const at::Tensor& like, const char* what, const char* like_what) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (!t.defined()) continue;
    if (t.sizes() != like.sizes()) {
      return c10::str(what, " shape mismatch, expected ", shape(like), " (the ", like_what, "'s), got ", shape(t),
                      " (", what, " ", i, "): every ", what, " must have the ", like_what, "'s shape");
    }
    if (t.scalar_type() != like.scalar_type()) {
      return c10::str(what, " ", i, " is ", t.scalar_type(), " but the ", like_what, " is ", like.scalar_type(),
                      ": every ", what, " must have the ", like_what, "'s dtype");
    }
  }
  return "";
}

std::string gathered_output(const at::Tensor& output, const at::Tensor& input, int size) {
  if (output.scalar_type() != input.scalar_type()) {
    return c10::str("the output is ", output.scalar_type(), " but the input is ", input.scalar_type(),
                    ": they must have one dtype");
  }
  if (output.numel() == input.numel() * size) return "";
  auto expected = input.sizes().vec();
  if (expected.empty()) expected.push_back(1);
  expected[0] *= size;
  return c10::str("output shape mismatch, expected ", c10::IntArrayRef(expected), ", got ", shape(output),
                  ": the output holds world size (", size, ") x the input's ", input.numel(), " elements = ",
                  input.numel() * size, " (the inputs concatenated along dim 0, or stacked), it has ",
                  output.numel());
}

std::string scattered_input(const at::Tensor& input, const at::Tensor& output, int size) {
  if (input.scalar_type() != output.scalar_type()) {
    return c10::str("the input is ", input.scalar_type(), " but the output is ", output.scalar_type(),
                    ": they must have one dtype");
  }
  if (input.numel() == output.numel() * size) return "";
  return c10::str("scatter dimension 0: input size (", input.numel(), ") must be evenly divisible by replica group size (",
                  size, ") into the output: ", input.numel(), " / ", size, " = ",
                  static_cast<double>(input.numel()) / std::max(size, 1), ". Expected output size: ",
                  input.numel() / std::max(size, 1), ", actual output size: ", output.numel(), " (input ",
                  shape(input), ", output ", shape(output), "; the input holds world size x the output's elements)");
}

std::string single_input_scatter(const at::Tensor& input, const at::Tensor& output, int size, int64_t* dim) {
  auto in = input.sizes().vec(), out = output.sizes().vec();
  while (in.size() < out.size()) in.insert(in.begin(), 1);
  while (out.size() < in.size()) out.insert(out.begin(), 1);
  std::vector<size_t> differ;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != out[d]) differ.push_back(d);
  }
  *dim = differ.empty() ? 0 : static_cast<int64_t>(differ[0]);
  if (input.scalar_type() != output.scalar_type()) {
    return c10::str("output tensor dtype (", output.scalar_type(), ") must match input tensor dtype (",
                    input.scalar_type(), ")");
  }
  if (differ.size() > 1) {
    std::ostringstream found;
    for (size_t i = 0; i < differ.size(); ++i) {
      found << (i ? ", " : "") << "dim[" << differ[i] << "]: " << in[differ[i]] << " -> " << out[differ[i]];
    }
    return c10::str("single tensor scatter can only differ in one dimension, found differences in: ", found.str(),
                    " (input ", shape(input), ", output ", shape(output), "). With one input tensor, the output is ",
                    "the input's slice of one rank along the scatter dimension");
  }
  if (differ.empty()) {
    if (size == 1) return "";
    return c10::str("when input and output shapes are identical, replica group must have size 1, got ", size,
                    " (", shape(input), "). With one input tensor, the output is its slice of one rank along the ",
                    "scatter dimension; or pass one input per rank, each of the output's shape");
  }
  const int64_t d = *dim;
  if (in[d] == out[d] * size) return "";
  return c10::str("scatter dimension ", d, ": input size (", in[d], ") must be evenly divisible by replica group size (",
                  size, "), but ", in[d], " / ", size, " = ", static_cast<double>(in[d]) / std::max(size, 1),
                  ". Expected output size: ", in[d] / std::max(size, 1), ", actual output size: ", out[d],
                  " (input ", shape(input), ", output ", shape(output), ")");
}

std::string same_trailing_shape(const TensorList& inputs) {
  if (inputs.size() < 2) return "";
  auto trailing = [](const at::Tensor& t) { return t.dim() > 0 ? t.sizes().slice(1).vec() : std::vector<int64_t>{}; };
  auto first = trailing(inputs[0]);
  for (const auto& t : inputs) {
    if (trailing(t) != first) {
      std::ostringstream all;
      for (size_t i = 0; i < inputs.size(); ++i) all << (i ? ", " : "[") << inputs[i].sizes();
      all << "]";
      return c10::str("requires all input tensors to have the same shape except dimension 0. Got shapes: ", all.str());
    }
  }
  return "";
}

std::string even_splits(const at::Tensor& t, const std::vector<int64_t>& splits, int size, const char* what) {
  const int64_t rows = t.dim() > 0 ? t.size(0) : 0;
  if (splits.empty()) {
    if (rows % size == 0) return "";
    return c10::str("the ", what, "'s dim 0 (", rows, ") must divide by the group size ", size,
                    " when no split sizes are given");
  }
  if (static_cast<int>(splits.size()) != size) {
    return c10::str(what, "_split_sizes length (", splits.size(), ") must match group_size (", size, ")");
  }
  // A permutation (the whole tensor to or from one rank, nothing to the others: _functional_collectives.
  // permute_tensor, which PyTorch's ring attention backward uses) is accepted: TorchNeuron 2.33 documents context
  // parallelism on the neuron backend, which needs it (its April snapshot refused it; docs/fidelity.md).
  int nonzero = 0;
  for (int64_t s : splits) nonzero += s != 0;
  if (nonzero == 1 && *std::max_element(splits.begin(), splits.end()) == rows) return "";
  for (int64_t s : splits) {
    if (s != splits[0]) {
      return c10::str("Only even split sizes are supported on Neuron. Got ", what,
                      "_split_sizes: ", c10::IntArrayRef(splits),
                      ". Pad each rank's block to the largest and send equal blocks (no split sizes)");
    }
  }
  if (splits[0] * size != rows) {
    return c10::str("the ", what, " split sizes ", c10::IntArrayRef(splits), " add up to ", splits[0] * size,
                    ", not its dim 0 (", rows, ")");
  }
  return "";
}

} // namespace neuron::distributed::arguments
