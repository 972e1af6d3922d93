// The batch-norm kernels nn.SyncBatchNorm calls, which CUDA has and the CPU lacks.
//
// SyncBatchNorm (torch/nn/modules/_functions.py) splits batch norm around its collectives:
// batch_norm_stats (each rank's per-channel mean and 1/std), an all_gather, then
// batch_norm_gather_stats_with_counts (the group's statistics, merged by each rank's count, and the
// running statistics) and batch_norm_elemt (normalize); in backward batch_norm_backward_reduce
// (per-channel sums of the gradient), an all_reduce, then batch_norm_backward_elemt. TorchNeuron
// runs them on the device; ATen has only CUDA kernels, so the boxed fallback's CPU kernel does not
// exist. Here they are written with ATen ops on the device tensors, computing what CUDA's kernels
// compute (aten/src/ATen/native/cuda/Normalization.cu{h}): statistics in float32 for half and
// bfloat16 inputs (CUDA's accumulate type), results in the input's dtype.
#include "aten/native/Native.h"

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>

namespace neuron::native {
namespace {

// CUDA's accumulate type: float32 for 16-bit floats, the dtype itself otherwise.
at::ScalarType acc_type(at::ScalarType t) {
  return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t;
}

// The dims a per-channel statistic reduces over: all but dim 1 (channels).
std::vector<int64_t> reduced_dims(const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 2, "batch norm expects an input of at least 2 dims (batch, channels, ...), got ",
              input.sizes());
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel vector shaped to broadcast against the input: [1, C, 1, ...].
at::Tensor per_channel(const at::Tensor& v, const at::Tensor& input) {
  std::vector<int64_t> shape(input.dim(), 1);
  shape[1] = input.size(1);
  return v.reshape(shape);
}

at::Tensor in_acc(const at::Tensor& t) { return t.to(acc_type(t.scalar_type())); }

}  // namespace

std::tuple<at::Tensor, at::Tensor> batch_norm_stats(const at::Tensor& input, double eps) {
  auto x = in_acc(input);
  auto dims = reduced_dims(input);
  auto [var, mean] = at::var_mean(x, dims, /*correction=*/0, /*keepdim=*/false);
  return {mean, at::rsqrt(var + eps)};
}

at::Tensor batch_norm_elemt(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias, const at::Tensor& mean, const at::Tensor& invstd,
                            double eps) {
  auto y = (in_acc(input) - per_channel(mean, input)) * per_channel(invstd, input);
  if (weight && weight->defined()) y = y * per_channel(in_acc(*weight), input);
  if (bias && bias->defined()) y = y + per_channel(in_acc(*bias), input);
  return y.to(input.scalar_type()).contiguous(input.suggest_memory_format());
}

at::Tensor& batch_norm_elemt_out(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                 const std::optional<at::Tensor>& bias, const at::Tensor& mean,
                                 const at::Tensor& invstd, double eps, at::Tensor& out) {
  auto y = native::batch_norm_elemt(input, weight, bias, mean, invstd, eps);
  at::native::resize_output(out, y.sizes());
  out.copy_(y);
  return out;
}

// Merges each rank's (count, mean, invstd) as CUDA's batch_norm_reduce_statistics_kernel does (a
// variance is 1/invstd^2 - eps, counts weight the means, the spread of the means adds to the
// variance), and updates the running statistics with the unbiased variance.
std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats_with_counts(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, double momentum,
    double eps, const at::Tensor& counts) {
  TORCH_CHECK(mean.dim() == 2 && invstd.sizes() == mean.sizes(),
              "batch_norm_gather_stats_with_counts: mean and invstd must be [world size, channels], got ",
              mean.sizes(), " and ", invstd.sizes());
  auto n = counts.to(mean.scalar_type()).reshape({-1, 1});  // [world, 1]
  TORCH_CHECK(n.size(0) == mean.size(0), "batch_norm_gather_stats_with_counts: ", n.size(0), " counts for ",
              mean.size(0), " ranks' statistics");
  auto total = n.sum(0);                            // [1]
  auto global_mean = (mean * n).sum(0) / total;     // [C]
  auto var = at::reciprocal(invstd * invstd) - eps;  // each rank's biased variance
  auto m2 = (n * (var + (mean - global_mean).pow(2))).sum(0);
  auto global_invstd = at::rsqrt(m2 / total + eps);
  if (running_mean && running_mean->defined()) {
    auto& r = *running_mean;
    r.copy_(r * (1 - momentum) + global_mean.to(r.scalar_type()) * momentum);
  }
  if (running_var && running_var->defined()) {
    auto& r = *running_var;
    auto unbiased = m2 / (total - 1);
    r.copy_(r * (1 - momentum) + unbiased.to(r.scalar_type()) * momentum);
  }
  return {global_mean, global_invstd};
}

std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats(const at::Tensor& input, const at::Tensor& mean,
                                                           const at::Tensor& invstd,
                                                           const std::optional<at::Tensor>& running_mean,
                                                           const std::optional<at::Tensor>& running_var,
                                                           double momentum, double eps, int64_t count) {
  auto counts = at::full({mean.size(0)}, static_cast<double>(count), mean.options());
  return native::batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum, eps,
                                                     counts);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_reduce(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& weight, bool /*input_g*/, bool /*weight_g*/, bool /*bias_g*/) {
  auto dims = reduced_dims(input);
  auto dy = in_acc(grad_out);
  auto sum_dy = dy.sum(dims);
  auto sum_dy_xmu = (dy * (in_acc(input) - per_channel(mean, input))).sum(dims);
  auto param_dtype = weight && weight->defined() ? weight->scalar_type() : mean.scalar_type();
  // All four whatever the flags, as TorchNeuron's kernel returns them (CUDA leaves the unrequested ones
  // undefined); nn.SyncBatchNorm's backward drops the gradients it was not asked for itself.
  return {sum_dy, sum_dy_xmu, (sum_dy_xmu * invstd).to(param_dtype), sum_dy.to(param_dtype)};
}

// dx = (dy - mean(dy) - (x - mean) * invstd^2 * mean(dy * (x - mean))) * invstd * weight, the means over
// the whole group's elements (the sums were all-reduced; `count` holds each rank's element count).
at::Tensor batch_norm_backward_elemt(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
                                     const at::Tensor& invstd, const std::optional<at::Tensor>& weight,
                                     const at::Tensor& sum_dy, const at::Tensor& sum_dy_xmu,
                                     const at::Tensor& count) {
  auto total = count.to(sum_dy.scalar_type()).sum();
  auto mean_dy = per_channel(sum_dy / total, input);
  auto mean_dy_xmu = per_channel(sum_dy_xmu / total, input);
  auto istd = per_channel(invstd, input);
  auto scale = weight && weight->defined() ? istd * per_channel(in_acc(*weight), input) : istd;
  auto xmu = in_acc(input) - per_channel(mean, input);
  auto dx = (in_acc(grad_out) - mean_dy - xmu * istd * istd * mean_dy_xmu) * scale;
  return dx.to(input.scalar_type()).contiguous(input.suggest_memory_format());
}

} // namespace neuron::native
