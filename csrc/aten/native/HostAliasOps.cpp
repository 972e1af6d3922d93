// Frequent ops that run their CPU kernel on host aliases without the boxed fallback: sum and mean over
// dimensions, cat (24 calls in a training step of a small Llama, where each cost ~3-4.5 us more than on
// CPU through the fallback's generic work: the argument stack, the op lookup, two scans of every argument),
// and the rest of a causal LM's training step that reached the fallback: fill_, index_select (the
// embedding), CPU flash attention forward and backward, log_softmax and nll_loss forward and backward,
// embedding backward.
//
// The CPU kernel reads the inputs through their host aliases and allocates its result on the host, which
// then becomes device memory through the host bridge (adopted without a copy where the runtime can): the
// same kernel on the same bytes as a CPU tensor's call, so results are bit-equal. Only the common case
// takes this path: every tensor a neuron tensor of one core, in one floating dtype without a Neuron dtype
// rule (float32, bfloat16, float16), and no dtype conversion asked; the rest (mixed devices or dtypes,
// float64, integers, complex) takes the boxed fallback, whose checks, rules and messages apply.
#include "aten/native/HostKernels.h"
#include "aten/native/Native.h"

#include <ATen/ops/_log_softmax_backward_data_cpu_dispatch.h>
#include <ATen/ops/_log_softmax_cpu_dispatch.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward_cpu_dispatch.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_cpu_dispatch.h>
#include <ATen/ops/cat_cpu_dispatch.h>
#include <ATen/ops/embedding_dense_backward_cpu_dispatch.h>
#include <ATen/ops/fill_cpu_dispatch.h>
#include <ATen/ops/index_select_cpu_dispatch.h>
#include <ATen/ops/mean_cpu_dispatch.h>
#include <ATen/ops/nll_loss_backward_cpu_dispatch.h>
#include <ATen/ops/nll_loss_forward_cpu_dispatch.h>
#include <ATen/ops/sum_cpu_dispatch.h>

namespace neuron::native {
namespace {

using host_kernels::boxed_fallback;
using host_kernels::on_host_alias_path;
using host_kernels::record_signature;
using neuron::host_alias;  // overloaded below for optional tensors

// A reduction of `self` to its own dtype.
bool reduces_on_this_path(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return on_host_alias_path({&self}) && (!dtype || *dtype == self.scalar_type());
}

// An argument the common case takes in another dtype than the floating operands (an index, a target):
// a strided tensor on the operands' core, not float64 (whose rule the fallback applies to inputs).
bool on_core_of(const at::Tensor& t, const at::Tensor& like) {
  return t.device() == like.device() && t.layout() == at::kStrided && t.scalar_type() != at::kDouble;
}

// An optional argument of any dtype (an attention mask: bool or floating): absent, or as on_core_of.
bool absent_or_on_core_of(const std::optional<at::Tensor>& t, const at::Tensor& like) {
  return !t || !t->defined() || on_core_of(*t, like);
}

// An optional floating operand (a weight): absent, or in the operands' dtype on their core.
bool absent_or_like(const std::optional<at::Tensor>& t, const at::Tensor& like) {
  return !t || !t->defined() || on_host_alias_path({&*t, &like});
}

std::optional<at::Tensor> host_alias(const std::optional<at::Tensor>& t) {
  if (!t || !t->defined()) return t;
  return neuron::host_alias(*t);
}

} // namespace

at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype) {
  if (!reduces_on_this_path(self, dtype))
    return boxed_fallback<ATEN_OP2(sum, dim_IntList)>(self, dim, keepdim, dtype);
  record_signature<ATEN_OP2(sum, dim_IntList)>(self);
  return from_host(at::cpu::sum(host_alias(self), dim, keepdim, dtype), self.device().index());
}

at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype) {
  if (!reduces_on_this_path(self, dtype))
    return boxed_fallback<ATEN_OP2(mean, dim)>(self, dim, keepdim, dtype);
  record_signature<ATEN_OP2(mean, dim)>(self);
  return from_host(at::cpu::mean(host_alias(self), dim, keepdim, dtype), self.device().index());
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  if (!on_host_alias_path(tensors)) return boxed_fallback<ATEN_OP(cat)>(tensors, dim);
  record_signature<ATEN_OP(cat)>(tensors);
  c10::SmallVector<at::Tensor, 8> hosts;
  for (const at::Tensor& t : tensors) hosts.push_back(host_alias(t));
  return from_host(at::cpu::cat(at::ITensorListRef(hosts.data(), hosts.size()), dim), tensors.front().device().index());
}

at::Tensor& fill_(at::Tensor& self, const at::Scalar& value) {
  if (!on_host_alias_path({&self})) return boxed_fallback<ATEN_OP2(fill_, Scalar)>(self, value);
  record_signature<ATEN_OP2(fill_, Scalar)>(self);
  at::Tensor host = host_alias(self);
  at::cpu::fill_(host, value);
  return self;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  if (!on_host_alias_path({&self}) || !on_core_of(index, self))
    return boxed_fallback<ATEN_OP(index_select)>(self, dim, index);
  record_signature<ATEN_OP(index_select)>(self, index);
  return from_host(at::cpu::index_select(host_alias(self), dim, host_alias(index)), self.device().index());
}

at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices, int64_t num_weights,
                                    int64_t padding_idx, bool scale_grad_by_freq) {
  if (!on_host_alias_path({&grad_output}) || !on_core_of(indices, grad_output))
    return boxed_fallback<ATEN_OP(embedding_dense_backward)>(grad_output, indices, num_weights, padding_idx,
                                                             scale_grad_by_freq);
  record_signature<ATEN_OP(embedding_dense_backward)>(grad_output, indices);
  return from_host(at::cpu::embedding_dense_backward(host_alias(grad_output), host_alias(indices), num_weights,
                                                     padding_idx, scale_grad_by_freq),
                   grad_output.device().index());
}

at::Tensor log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (half_to_float) return log_softmax_half_to_float(self, dim);
  if (!on_host_alias_path({&self})) return boxed_fallback<ATEN_OP(_log_softmax)>(self, dim, half_to_float);
  record_signature<ATEN_OP(_log_softmax)>(self);
  return from_host(at::cpu::_log_softmax(host_alias(self), dim, false), self.device().index());
}

at::Tensor log_softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                at::ScalarType input_dtype) {
  if (grad_output.scalar_type() == at::kFloat && input_dtype == at::kHalf)
    return log_softmax_backward_half_to_float(grad_output, output, dim);
  if (!on_host_alias_path({&grad_output, &output}) || input_dtype != output.scalar_type())
    return boxed_fallback<ATEN_OP(_log_softmax_backward_data)>(grad_output, output, dim, input_dtype);
  record_signature<ATEN_OP(_log_softmax_backward_data)>(grad_output, output);
  return from_host(at::cpu::_log_softmax_backward_data(host_alias(grad_output), host_alias(output), dim, input_dtype),
                   output.device().index());
}

std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor& self, const at::Tensor& target,
                                                    const std::optional<at::Tensor>& weight, int64_t reduction,
                                                    int64_t ignore_index) {
  if (!on_host_alias_path({&self}) || !on_core_of(target, self) || !absent_or_like(weight, self))
    return boxed_fallback<ATEN_OP(nll_loss_forward)>(self, target, weight, reduction, ignore_index);
  record_signature<ATEN_OP(nll_loss_forward)>(self, target, weight);
  return from_host(at::cpu::nll_loss_forward(host_alias(self), host_alias(target), host_alias(weight), reduction,
                                             ignore_index),
                   self.device().index());
}

at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                             const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  if (!on_host_alias_path({&grad_output, &self, &total_weight}) || !on_core_of(target, self) ||
      !absent_or_like(weight, self))
    return boxed_fallback<ATEN_OP(nll_loss_backward)>(grad_output, self, target, weight, reduction, ignore_index,
                                                      total_weight);
  record_signature<ATEN_OP(nll_loss_backward)>(grad_output, self, target, weight, total_weight);
  return from_host(at::cpu::nll_loss_backward(host_alias(grad_output), host_alias(self), host_alias(target),
                                              host_alias(weight), reduction, ignore_index, host_alias(total_weight)),
                   self.device().index());
}

// The CPU's fused flash attention, which scaled_dot_product_attention picks for neuron as for CPU
// (aten/RegisterHostKernels.cpp). Its logsumexp is float32 whatever the inputs' dtype.
std::tuple<at::Tensor, at::Tensor> flash_attention(const at::Tensor& query, const at::Tensor& key,
                                                   const at::Tensor& value, double dropout_p, bool is_causal,
                                                   const std::optional<at::Tensor>& attn_mask,
                                                   std::optional<double> scale) {
  if (!on_host_alias_path({&query, &key, &value}) || !absent_or_on_core_of(attn_mask, query))
    return boxed_fallback<ATEN_OP(_scaled_dot_product_flash_attention_for_cpu)>(query, key, value, dropout_p,
                                                                                is_causal, attn_mask, scale);
  record_signature<ATEN_OP(_scaled_dot_product_flash_attention_for_cpu)>(query, key, value, attn_mask);
  return from_host(at::cpu::_scaled_dot_product_flash_attention_for_cpu(host_alias(query), host_alias(key),
                                                                        host_alias(value), dropout_p, is_causal,
                                                                        host_alias(attn_mask), scale),
                   query.device().index());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& out, const at::Tensor& logsumexp, double dropout_p, bool is_causal,
    const std::optional<at::Tensor>& attn_mask, std::optional<double> scale) {
  if (!on_host_alias_path({&grad_out, &query, &key, &value, &out}) || !on_core_of(logsumexp, query) ||
      !absent_or_on_core_of(attn_mask, query))
    return boxed_fallback<ATEN_OP(_scaled_dot_product_flash_attention_for_cpu_backward)>(
        grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, attn_mask, scale);
  record_signature<ATEN_OP(_scaled_dot_product_flash_attention_for_cpu_backward)>(grad_out, query, key, value, out,
                                                                                   logsumexp, attn_mask);
  return from_host(at::cpu::_scaled_dot_product_flash_attention_for_cpu_backward(
                       host_alias(grad_out), host_alias(query), host_alias(key), host_alias(value), host_alias(out),
                       host_alias(logsumexp), dropout_p, is_causal, host_alias(attn_mask), scale),
                   query.device().index());
}

} // namespace neuron::native
