// The dedicated neuron kernels: ops the boxed fallback cannot serve.
//
// Factories (memory must come from the device allocator), storage surgery
// (resize_, set_: views of the fallback's host aliases would not share the
// device storage), copies between devices, and the few ops whose neuron
// semantics differ from the host kernel's. Registered in aten/RegisterNeuron.cpp;
// views are ATen's own generic kernels, registered there too.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>
#include <c10/core/Stream.h>

#include <array>
#include <optional>
#include <tuple>

namespace neuron::native {

// Empty.cpp: every fresh neuron tensor is allocated by empty_on_core (strides when given, else contiguous
// in memory_format) on core `index`; index_of checks a requested device and picks the current one by default.
c10::DeviceIndex index_of(std::optional<c10::Device> device);
at::Tensor empty_on_core(c10::DeviceIndex index, at::IntArrayRef size, std::optional<at::IntArrayRef> stride,
                         at::ScalarType dtype, std::optional<at::MemoryFormat> memory_format);
at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format);
at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin_memory);
// A ZeroTensor on the device (aten::_efficientzerotensor), as on CPU and CUDA.
at::Tensor efficientzerotensor(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory);

// Storage.cpp
const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size, std::optional<at::MemoryFormat> memory_format);
at::Tensor& set_storage(at::Tensor& self, at::Storage source, int64_t offset, at::IntArrayRef size,
                        at::IntArrayRef stride);
at::Tensor& set_source_storage(at::Tensor& self, at::Storage source);
at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src);
at::Tensor& set_empty(at::Tensor& self);
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from);
void record_stream(at::Tensor& self, c10::Stream stream);

// Copy.cpp
at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool non_blocking);
at::Tensor copy_from_and_resize(const at::Tensor& src, const at::Tensor& dst);
at::Scalar local_scalar_dense(const at::Tensor& self);
// The host view of a tensor of either device: a host alias of a neuron tensor, a CPU tensor as is.
at::Tensor as_host(const at::Tensor& t);

// MatMul.cpp: the host's BLAS kernel on host aliases, output allocated on the core; calls outside the
// common case (one core, one floating dtype) take the boxed fallback.
at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha);
at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2);

// HostAliasOps.cpp: sum and mean over dimensions, cat: the CPU kernel on host aliases, the result adopted;
// calls outside the common case (one core, one floating dtype, no dtype conversion) take the boxed fallback.
at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype);
at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype);
at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim);
// The same for the other ops of a causal LM's training step that reached the fallback; arguments of another
// dtype (indices, targets, logsumexp, masks) must be on the operands' core too.
at::Tensor& fill_(at::Tensor& self, const at::Scalar& value);
at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index);
at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices, int64_t num_weights,
                                    int64_t padding_idx, bool scale_grad_by_freq);
at::Tensor log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float);
at::Tensor log_softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                at::ScalarType input_dtype);
std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor& self, const at::Tensor& target,
                                                    const std::optional<at::Tensor>& weight, int64_t reduction,
                                                    int64_t ignore_index);
at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                             const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight);
std::tuple<at::Tensor, at::Tensor> flash_attention(const at::Tensor& query, const at::Tensor& key,
                                                   const at::Tensor& value, double dropout_p, bool is_causal,
                                                   const std::optional<at::Tensor>& attn_mask,
                                                   std::optional<double> scale);
std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& out, const at::Tensor& logsumexp, double dropout_p, bool is_causal,
    const std::optional<at::Tensor>& attn_mask, std::optional<double> scale);

// FlashAttention.cpp: CUDA's flash attention with its log-sum-exp (what context-parallel attention merges), computed
// by the host's flash kernel.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
flash_attention_with_logsumexp(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                               double dropout_p, bool is_causal, bool return_debug_mask, std::optional<double> scale);
std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_with_logsumexp_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k,
    c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal, const at::Tensor& philox_seed,
    const at::Tensor& philox_offset, std::optional<double> scale);

// Zero.cpp: zero_ of a dense tensor is a memset through the host bridge; other calls take the fallback.
at::Tensor& zero_(at::Tensor& self);

// Contiguous.cpp: contiguous(memory_format=torch.preserve_format) makes the tensor contiguous, as TorchNeuron.
at::Tensor contiguous(const at::Tensor& self, at::MemoryFormat memory_format);

// Histc.cpp
at::Tensor histc_any_dtype(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max);
at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                      at::Tensor& out);

// Convolution.cpp
at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups);
std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask);

// SyncBatchNorm.cpp: the batch-norm kernels nn.SyncBatchNorm calls (CUDA has them, the CPU does not).
std::tuple<at::Tensor, at::Tensor> batch_norm_stats(const at::Tensor& input, double eps);
at::Tensor batch_norm_elemt(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias, const at::Tensor& mean, const at::Tensor& invstd,
                            double eps);
at::Tensor& batch_norm_elemt_out(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                 const std::optional<at::Tensor>& bias, const at::Tensor& mean,
                                 const at::Tensor& invstd, double eps, at::Tensor& out);
std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats(const at::Tensor& input, const at::Tensor& mean,
                                                           const at::Tensor& invstd,
                                                           const std::optional<at::Tensor>& running_mean,
                                                           const std::optional<at::Tensor>& running_var,
                                                           double momentum, double eps, int64_t count);
std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats_with_counts(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, double momentum,
    double eps, const at::Tensor& counts);
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_reduce(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& weight, bool input_g, bool weight_g, bool bias_g);
at::Tensor batch_norm_backward_elemt(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
                                     const at::Tensor& invstd, const std::optional<at::Tensor>& weight,
                                     const at::Tensor& sum_dy, const at::Tensor& sum_dy_xmu, const at::Tensor& count);

// RmsNorm.cpp: rms_norm as TorchNeuron runs it (always the fused form), and the fused form's backward.
at::Tensor rms_norm(const at::Tensor& input, c10::SymIntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                    std::optional<double> eps);
std::tuple<at::Tensor, at::Tensor> fused_rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                           at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                           const std::optional<at::Tensor>& weight,
                                                           std::array<bool, 2> mask);

// WithoutCpuKernel.cpp: other ops an accelerator runs that have no CPU kernel.
std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_backward(const at::Tensor& self, const at::Tensor& grad_output,
                                                               const at::Tensor& weight, std::array<bool, 3> mask);
at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float);
at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            at::ScalarType input_dtype);
// log_softmax's half_to_float forms (HostAliasOps.cpp's log_softmax kernels call them).
at::Tensor log_softmax_half_to_float(const at::Tensor& self, int64_t dim);
at::Tensor log_softmax_backward_half_to_float(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim);
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
fused_attention_overrideable(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                             const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                             bool return_debug_mask, std::optional<double> scale);
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_overrideable_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k, int64_t max_q,
    int64_t max_k, double dropout_p, bool is_causal, const at::Tensor& philox_seed, const at::Tensor& philox_offset,
    std::optional<double> scale);
// Which SDPA backend a neuron call takes (the _fused_sdp_choice stub's PrivateUse1 entry).
int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa);

} // namespace neuron::native
