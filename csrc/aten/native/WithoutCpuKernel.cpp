// Ops an accelerator runs that have no CPU kernel: the boxed fallback, which runs each op's CPU
// kernel, cannot serve them, and TorchNeuron runs them on the device (its registered ops,
// /work/shared/real-registered-ops.json). Written with ATen ops on the device tensors, computing what
// CUDA computes (the SyncBatchNorm family is in SyncBatchNorm.cpp):
//  * linear_backward: the three gradients of linear (CPU has only the nested-tensor kernel);
//  * _softmax / _log_softmax with half_to_float, and their backwards with a float gradient of a half
//    input: CUDA computes a float16 input in float32 and returns float32; the CPU refuses;
//  * scaled_dot_product_attention's OVERRIDEABLE backend (_scaled_dot_product_fused_attention_overrideable
//    and its backward), the backend TorchNeuron's SDPA runs on: without dropout it is the CPU's fused
//    flash-attention kernel (the same numbers as CPU's flash path); with dropout, or when the attention
//    bias needs a gradient, the math formulation, with a dropout mask drawn from a seed kept for backward.
#include "aten/native/HostKernels.h"
#include "aten/native/Native.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>

#include <cmath>
#include <mutex>

namespace neuron::native {
namespace {

using host_kernels::boxed_fallback;

// half_to_float: CUDA's conversion is for float16 inputs only ("conversion is supported for Half type only").
at::Tensor half_input_in_float(const at::Tensor& self, const char* op) {
  TORCH_CHECK(self.scalar_type() == at::kHalf, op, " with half_to_float=True: conversion is supported for Half type "
              "only (as on CUDA), got ", self.scalar_type());
  return self.to(at::kFloat);
}

// ---- scaled dot product attention, OVERRIDEABLE ----

// Grouped-query attention: key/value heads repeated to the query's head count, and their gradients summed back.
at::Tensor repeat_heads(const at::Tensor& kv, int64_t heads) {
  const int64_t kv_heads = kv.size(-3);
  return kv_heads == heads ? kv : kv.repeat_interleave(heads / kv_heads, -3);
}

at::Tensor sum_heads(const at::Tensor& grad, int64_t kv_heads) {
  const int64_t heads = grad.size(-3);
  if (heads == kv_heads) return grad;
  return grad.unflatten(-3, {kv_heads, heads / kv_heads}).sum(-3);
}

double softmax_scale(const at::Tensor& query, std::optional<double> scale) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
}

// The attention scores in float32: scale * q k^T, a top-left causal mask, then the bias (a boolean mask
// keeps where true; a float bias adds).
at::Tensor attention_scores(const at::Tensor& q, const at::Tensor& k, const std::optional<at::Tensor>& bias,
                            bool is_causal, double scale) {
  auto s = at::matmul(q.to(at::kFloat), k.to(at::kFloat).transpose(-2, -1)) * scale;
  if (is_causal) {
    auto keep = at::ones({s.size(-2), s.size(-1)}, s.options().dtype(at::kBool)).tril();
    s = s.masked_fill(keep.logical_not(), -std::numeric_limits<float>::infinity());
  }
  if (bias && bias->defined()) {
    s = bias->scalar_type() == at::kBool
            ? s.masked_fill(bias->logical_not(), -std::numeric_limits<float>::infinity())
            : s + bias->to(at::kFloat);
  }
  return s;
}

// The dropout mask (kept entries scaled by 1/(1-p)) that `seed` draws, on the device of `like`: the
// same in forward and backward. Drawn on the CPU with a generator of its own.
at::Tensor dropout_mask(const at::Tensor& like, double p, int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  auto keep = at::empty(like.sizes(), at::TensorOptions().dtype(at::kFloat)).bernoulli_(1.0 - p, gen);
  return keep.div_(1.0 - p).to(like.device());
}

// A seed for one attention's dropout mask, from the CPU's default generator (as TorchNeuron's random
// ops, which fall back to the CPU, draw their bits).
int64_t draw_seed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return static_cast<int64_t>(at::check_generator<at::CPUGeneratorImpl>(gen)->random64() >> 1);
}

} // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_backward(const at::Tensor& self, const at::Tensor& grad_output,
                                                               const at::Tensor& weight, std::array<bool, 3> mask) {
  at::Tensor grad_input, grad_weight, grad_bias;
  if (mask[0]) grad_input = at::matmul(grad_output, weight);
  if (mask[1] || mask[2]) {
    auto dy = grad_output.reshape({-1, grad_output.size(-1)});
    if (mask[1]) grad_weight = dy.t().mm(self.reshape({-1, self.size(-1)}));
    if (mask[2]) grad_bias = dy.sum(0);
  }
  return {grad_input, grad_weight, grad_bias};
}

at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (half_to_float) return at::_softmax(half_input_in_float(self, "softmax"), dim, false);
  return boxed_fallback<ATEN_OP(_softmax)>(self, dim, half_to_float);
}

at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            at::ScalarType input_dtype) {
  if (grad_output.scalar_type() == at::kFloat && input_dtype == at::kHalf)  // backward of half_to_float
    return at::_softmax_backward_data(grad_output, output, dim, at::kFloat).to(at::kHalf);
  return boxed_fallback<ATEN_OP(_softmax_backward_data)>(grad_output, output, dim, input_dtype);
}

at::Tensor log_softmax_half_to_float(const at::Tensor& self, int64_t dim) {
  return at::_log_softmax(half_input_in_float(self, "log_softmax"), dim, false);
}

at::Tensor log_softmax_backward_half_to_float(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim) {
  return at::_log_softmax_backward_data(grad_output, output, dim, at::kFloat).to(at::kHalf);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
fused_attention_overrideable(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                             const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                             bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4,
              "scaled_dot_product_attention (OVERRIDEABLE) on neuron takes 4-D query, key and value "
              "[batch, heads, sequence, head dim], got ", query.sizes(), ", ", key.sizes(), ", ", value.sizes());
  const c10::SymInt max_q = query.size(-2), max_k = key.size(-2);
  auto no_seed = at::zeros({}, at::TensorOptions().dtype(at::kLong));
  if (dropout_p == 0.0) {
    auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(query, key, value, 0.0, is_causal, attn_bias,
                                                                      scale);
    return {out, lse, at::Tensor(), at::Tensor(), max_q, max_k, no_seed, no_seed, at::Tensor()};
  }
  const int64_t heads = query.size(-3);
  auto s = attention_scores(query, repeat_heads(key, heads), attn_bias, is_causal, softmax_scale(query, scale));
  auto lse = s.logsumexp(-1);
  const int64_t seed = draw_seed();
  auto p = (s - lse.unsqueeze(-1)).exp() * dropout_mask(s, dropout_p, seed);
  auto out = at::matmul(p, repeat_heads(value, heads).to(at::kFloat)).to(query.scalar_type());
  auto seed_tensor = at::scalar_tensor(seed, at::TensorOptions().dtype(at::kLong));
  return {out, lse, at::Tensor(), at::Tensor(), max_q, max_k, seed_tensor, no_seed, at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_overrideable_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k, int64_t max_q,
    int64_t max_k, double dropout_p, bool is_causal, const at::Tensor& philox_seed, const at::Tensor& philox_offset,
    std::optional<double> scale) {
  const bool bias_grad = grad_input_mask[3] && attn_bias.defined() && attn_bias.is_floating_point();
  std::optional<at::Tensor> bias = attn_bias.defined() ? std::optional<at::Tensor>(attn_bias) : std::nullopt;
  if (dropout_p == 0.0 && !bias_grad) {
    auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        grad_out, query, key, value, out, logsumexp, 0.0, is_causal, bias, scale);
    return {dq, dk, dv, at::Tensor()};
  }
  // The math formulation: P = softmax(S) (from the saved logsumexp), dropout applied as in forward.
  const int64_t heads = query.size(-3);
  const double sc = softmax_scale(query, scale);
  auto k = repeat_heads(key, heads).to(at::kFloat), v = repeat_heads(value, heads).to(at::kFloat);
  auto s = attention_scores(query, k, bias, is_causal, sc);
  auto p = (s - logsumexp.unsqueeze(-1)).exp();
  auto mask = dropout_p == 0.0 ? at::Tensor() : dropout_mask(s, dropout_p, philox_seed.item<int64_t>());
  auto dy = grad_out.to(at::kFloat);
  auto dv = at::matmul((mask.defined() ? p * mask : p).transpose(-2, -1), dy);
  auto dp = at::matmul(dy, v.transpose(-2, -1));
  if (mask.defined()) dp = dp * mask;
  auto ds = p * (dp - (dp * p).sum(-1, /*keepdim=*/true));
  auto dq = at::matmul(ds, k) * sc;
  auto dk = at::matmul(ds.transpose(-2, -1), query.to(at::kFloat)) * sc;
  at::Tensor dbias;
  if (bias_grad) dbias = ds.sum_to_size(attn_bias.sizes()).to(attn_bias.scalar_type());
  return {dq.to(query.scalar_type()), sum_heads(dk, key.size(-3)).to(key.scalar_type()),
          sum_heads(dv, value.size(-3)).to(value.scalar_type()), dbias};
}

// scaled_dot_product_attention asks this which backend runs a call. The CPU's choice (its fused
// flash-attention kernel, else the math path) whenever it is allowed: the same kernel and numbers as
// on CPU. When the caller allows only OVERRIDEABLE (`sdpa_kernel(SDPBackend.OVERRIDEABLE)`: TorchNeuron's
// own SDPA backend) and the inputs are 4-D, OVERRIDEABLE.
int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  auto& ctx = at::globalContext();
  if (ctx.userEnabledOverrideableSDP() && !ctx.userEnabledFlashSDP() && !ctx.userEnabledMathSDP() &&
      query.dim() == 4 && key.dim() == 4 && value.dim() == 4) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  return at::native::_fused_sdp_choice_stub.DEFAULT(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                                   enable_gqa);
}

} // namespace neuron::native
