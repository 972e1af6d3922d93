// Registration of the dedicated neuron kernels (aten/native/Native.h) and of
// ATen's generic view kernels for the PrivateUse1 ("neuron") dispatch key.
// View ops must be native: a fallback cannot produce views of device storage.
#include "aten/native/Native.h"
#include "aten/native/OpTracking.h"

#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

namespace neuron {
namespace {

// Ops TorchNeuron runs as one Neuron kernel that these kernels compute from other ops: op tracking records
// the op (NEURON_RECORDED_KERNEL), not the ops it is made of here.
constexpr char kLinearBackward[] = "aten::linear_backward";
constexpr char kFusedRmsNormBackward[] = "aten::_fused_rms_norm_backward";
constexpr char kRmsNorm[] = "aten::rms_norm";  // a function calling _fused_rms_norm there: both recorded
constexpr char kContiguous[] = "aten::contiguous";
constexpr char kBatchNormStats[] = "aten::batch_norm_stats";
constexpr char kBatchNormElemt[] = "aten::batch_norm_elemt";
constexpr char kBatchNormElemtOut[] = "aten::batch_norm_elemt.out";
constexpr char kBatchNormGatherStats[] = "aten::batch_norm_gather_stats";
constexpr char kBatchNormGatherStatsWithCounts[] = "aten::batch_norm_gather_stats_with_counts";
constexpr char kBatchNormBackwardReduce[] = "aten::batch_norm_backward_reduce";
constexpr char kBatchNormBackwardElemt[] = "aten::batch_norm_backward_elemt";

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", native::empty_memory_format);
  m.impl("empty_strided", native::empty_strided);
  m.impl("_efficientzerotensor", native::efficientzerotensor);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", native::resize_);
  m.impl("set_.source_Storage", native::set_source_storage);
  m.impl("set_.source_Storage_storage_offset", native::set_storage);
  m.impl("set_.source_Tensor", native::set_source_tensor);
  m.impl("set_", native::set_empty);
  m.impl("_copy_from", native::copy_from);
  m.impl("_copy_from_and_resize", native::copy_from_and_resize);
  m.impl("_local_scalar_dense", native::local_scalar_dense);
  m.impl("record_stream", native::record_stream);
  m.impl("_has_compatible_shallow_copy_type", native::has_compatible_shallow_copy_type);
  m.impl("mm", native::mm);
  m.impl("addmm", native::addmm);
  m.impl("bmm", native::bmm);
  m.impl("zero_", native::zero_);
  m.impl("sum.dim_IntList", native::sum_dim);
  m.impl("mean.dim", native::mean_dim);
  m.impl("cat", native::cat);
  m.impl("fill_.Scalar", native::fill_);
  m.impl("index_select", native::index_select);
  m.impl("embedding_dense_backward", native::embedding_dense_backward);
  m.impl("_log_softmax", native::log_softmax);
  m.impl("_log_softmax_backward_data", native::log_softmax_backward);
  m.impl("nll_loss_forward", native::nll_loss_forward);
  m.impl("nll_loss_backward", native::nll_loss_backward);
  m.impl("_scaled_dot_product_flash_attention_for_cpu", native::flash_attention);
  m.impl("_scaled_dot_product_flash_attention_for_cpu_backward", native::flash_attention_backward);
  m.impl("_scaled_dot_product_flash_attention", native::flash_attention_with_logsumexp);
  m.impl("_scaled_dot_product_flash_attention_backward", native::flash_attention_with_logsumexp_backward);
  m.impl("contiguous", NEURON_RECORDED_KERNEL(native::contiguous, kContiguous));
  m.impl("histc", native::histc_any_dtype);
  m.impl("histc.out", native::histc_out);
  m.impl("convolution_overrideable", native::convolution);
  m.impl("convolution_backward_overrideable", native::convolution_backward);
  m.impl("linear_backward", NEURON_RECORDED_KERNEL(native::linear_backward, kLinearBackward));
  m.impl("rms_norm", NEURON_RECORDED_KERNEL_WITH_PARTS(native::rms_norm, kRmsNorm));
  m.impl("_fused_rms_norm_backward", NEURON_RECORDED_KERNEL(native::fused_rms_norm_backward, kFusedRmsNormBackward));
  m.impl("_softmax", native::softmax);
  m.impl("_softmax_backward_data", native::softmax_backward);
  // The choice itself: without this the boxed fallback would ask the CPU's chooser, which knows no OVERRIDEABLE
  // (sdpa_kernel(SDPBackend.OVERRIDEABLE) then found "no viable backend").
  m.impl("_fused_sdp_choice", native::fused_sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", native::fused_attention_overrideable);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", native::fused_attention_overrideable_backward);
  m.impl("batch_norm_stats", NEURON_RECORDED_KERNEL(native::batch_norm_stats, kBatchNormStats));
  m.impl("batch_norm_elemt", NEURON_RECORDED_KERNEL(native::batch_norm_elemt, kBatchNormElemt));
  m.impl("batch_norm_elemt.out", NEURON_RECORDED_KERNEL(native::batch_norm_elemt_out, kBatchNormElemtOut));
  m.impl("batch_norm_gather_stats", NEURON_RECORDED_KERNEL(native::batch_norm_gather_stats, kBatchNormGatherStats));
  m.impl("batch_norm_gather_stats_with_counts",
         NEURON_RECORDED_KERNEL(native::batch_norm_gather_stats_with_counts, kBatchNormGatherStatsWithCounts));
  m.impl("batch_norm_backward_reduce",
         NEURON_RECORDED_KERNEL(native::batch_norm_backward_reduce, kBatchNormBackwardReduce));
  m.impl("batch_norm_backward_elemt",
         NEURON_RECORDED_KERNEL(native::batch_norm_backward_elemt, kBatchNormBackwardElemt));
}

// rms_norm and contiguous are implicit composites: at the autograd key too, so that autograd differentiates
// the ops they call (as TorchNeuron registers them).
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("rms_norm", NEURON_RECORDED_KERNEL_WITH_PARTS(native::rms_norm, kRmsNorm));
  m.impl("contiguous", NEURON_RECORDED_KERNEL(native::contiguous, kContiguous));
}

// Copies handle conjugate/negative views themselves (the host copy_ resolves
// the bits). Without these fallthroughs the conj/neg fallback would
// materialise the view with clone -> copy_ -> _copy_from -> itself, forever.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

// scaled_dot_product_attention asks this stub which kernel runs a neuron call (WithoutCpuKernel.cpp).
const bool g_sdp_choice = [] {
  at::native::_fused_sdp_choice_stub.set_privateuse1_dispatch_ptr(&native::fused_sdp_choice);
  return true;
}();

} // namespace neuron
