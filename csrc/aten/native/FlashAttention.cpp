// CUDA's flash-attention op, aten::_scaled_dot_product_flash_attention, and its backward, on neuron: attention that
// also returns its log-sum-exp, computed by the host's flash kernel.
//
// Context-parallel attention merges partial attentions computed on different ranks, which needs each partial's
// log-sum-exp. Diffusers' ring attention gets it from this op (its `_native_flash` backend, the one backend of
// Diffusers 0.42.1 that returns the log-sum-exp without a CUDA-only package), and PyTorch's own ring attention
// dispatches it too. ATen implements it for CUDA only; the host has the same kernel under another name and
// signature (`_scaled_dot_product_flash_attention_for_cpu`, which scaled_dot_product_attention picks on neuron as on
// CPU: aten/RegisterHostKernels.cpp). This kernel is that one with CUDA's signature: same output and log-sum-exp
// (float32, [batch, heads, query length]), no cumulative sequence lengths (dense inputs), no random state (dropout,
// where the host kernel supports it, draws from the host's generator). compile/host_graph.py puts the same
// semantics into compiled graphs. Real TorchNeuron 2.33 registers `_scaled_dot_product_fused_attention_overrideable`
// instead (docs/fidelity.md).
#include "aten/native/Native.h"

#include <ATen/ATen.h>

namespace neuron::native {

namespace {

void check_dense_4d(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.dim() == 4, "_scaled_dot_product_flash_attention on neuron: ", what,
              " must be [batch, heads, sequence, head_dim], got ", t.dim(), " dimensions ", t.sizes());
}

} // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
flash_attention_with_logsumexp(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                               double dropout_p, bool is_causal, bool return_debug_mask,
                               std::optional<double> scale) {
  TORCH_CHECK(!return_debug_mask, "_scaled_dot_product_flash_attention on neuron: return_debug_mask=True is not "
              "supported (it is a CUDA debugging aid); call it with return_debug_mask=False");
  check_dense_4d(query, "query");
  check_dense_4d(key, "key");
  check_dense_4d(value, "value");
  auto [out, logsumexp] = at::_scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal,
                                                                          std::nullopt, scale);
  auto none = at::empty({0}, query.options().dtype(at::kLong));
  return {out, logsumexp, at::Tensor(), at::Tensor(), query.sym_size(2), key.sym_size(2), none, none,
          at::empty({0}, query.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_with_logsumexp_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/,
    const at::Tensor& /*cum_seq_k*/, c10::SymInt /*max_q*/, c10::SymInt /*max_k*/, double dropout_p, bool is_causal,
    const at::Tensor& /*philox_seed*/, const at::Tensor& /*philox_offset*/, std::optional<double> scale) {
  return at::_scaled_dot_product_flash_attention_for_cpu_backward(grad_out, query, key, value, out, logsumexp,
                                                                   dropout_p, is_causal, std::nullopt, scale);
}

} // namespace neuron::native
