// Dedicated neuron kernels: the ops the fallback cannot serve. Factories
// (memory must come from the device allocator), views (must share the device
// storage), resize/set_ (storage surgery) and copies (device <-> host, core <->
// core), plus reading a scalar back.
#include "Neuron.h"
#include "runtime/Runtime.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace neuron {
namespace {

c10::DeviceIndex index_of(std::optional<c10::Device> device) {
  if (!device || !device->has_index()) return current_device();
  TORCH_CHECK(device->type() == kNeuron, "expected a neuron device, got ", *device);
  check_index(device->index());
  return device->index();
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  c10::DeviceGuard guard(c10::Device(kNeuron, index_of(device)));
  return at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  c10::DeviceGuard guard(c10::Device(kNeuron, index_of(device)));
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

void ensure_storage(const at::Tensor& self) {
  auto* impl = self.unsafeGetTensorImpl();
  if (impl->numel() == 0) return;
  size_t needed = at::detail::computeStorageNbytes(impl->sizes(), impl->strides(), impl->dtype().itemsize(),
                                                  impl->storage_offset());
  auto* storage = impl->unsafe_storage().unsafeGetStorageImpl();
  if (needed > storage->nbytes()) resize_bytes(storage, needed);
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format) impl->empty_tensor_restride(*memory_format);
  ensure_storage(self);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, at::Storage source, int64_t offset, at::IntArrayRef size,
                        at::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, offset, size, stride);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_offset(offset);
  if (stride.data()) {
    impl->set_sizes_and_strides(size, stride);
  } else {
    impl->set_sizes_contiguous(size);
  }
  ensure_storage(self);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, source, 0, {n}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src) {
  if (self.unsafeGetTensorImpl() == src.unsafeGetTensorImpl()) return self;
  return set_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, device_allocator(), true);
  return set_storage(self, empty, 0, {0}, {});
}

bool is_dense_copy(const at::Tensor& src, const at::Tensor& dst) {
  return src.dtype() == dst.dtype() && src.sizes() == dst.sizes() && src.is_contiguous() &&
         dst.is_contiguous() && src.is_conj() == dst.is_conj() && src.is_neg() == dst.is_neg();
}

at::Tensor as_host(const at::Tensor& t) {
  if (t.device().type() == kNeuron) return host_alias(t);
  TORCH_CHECK(t.is_cpu(), "Copy between neuron and ", t.device(), " is not supported: go through the CPU");
  return t;
}

// src -> dst where at least one of them is a neuron tensor. Both live in host
// memory, so one memcpy (contiguous, same dtype) or one host copy_ (strided,
// dtype conversion, broadcast) does it, with no staging buffer.
at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool /*non_blocking*/) {
  if (dst.numel() == 0) return dst;
  if (is_dense_copy(src, dst)) {
    rt::copy(dst.data_ptr(), src.data_ptr(), src.nbytes());
    return dst;
  }
  as_host(dst).copy_(as_host(src));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& src, const at::Tensor& dst) {
  if (dst.sizes() != src.sizes()) resize_(dst, src.sizes(), std::nullopt);
  return copy_from(src, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) { return at::_local_scalar_dense(host_alias(self)); }

void record_stream(at::Tensor&, c10::Stream) {}

// histc of integer tensors: CUDA has it (Transformers' MoE routing counts
// tokens per expert with histc on int32 on every device but CPU/MPS); the
// host kernel has floating types only. Count in float, return the input dtype.
at::Tensor histc_int(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  at::Tensor h = as_host(self);
  bool integral = c10::isIntegralType(self.scalar_type(), /*includeBool=*/true);
  at::Tensor out = at::histc(integral ? h.to(at::kFloat) : h, bins, min, max);
  return from_host(integral ? out.to(self.scalar_type()) : out, self.device().index());
}

at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                      at::Tensor& out) {
  at::Tensor r = histc_int(self, bins, min, max);
  if (out.sizes() != r.sizes()) resize_(out, r.sizes(), std::nullopt);
  copy_from(r, out, false);
  return out;
}

// Dense neuron and CPU tensors share one TensorImpl layout, so `param.data =
// neuron_tensor` may swap storage in place. This keeps Parameter identity
// across module.to("neuron"), as for CUDA (optimizers and PEFT rely on it).
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && (t.is_cpu() || t.device().type() == kNeuron);
  };
  return dense(self) && dense(from);
}

// Convolutions reach a non-CPU/CUDA backend as convolution_overrideable; run
// the host convolution (which picks its own algorithm) on aliases.
at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups) {
  std::optional<at::Tensor> hbias;
  if (bias && bias->defined()) hbias = as_host(*bias);
  auto out = at::convolution(as_host(input), as_host(weight), hbias, stride, padding, dilation, transposed,
                             output_padding, groups);
  return from_host(out, input.device().index());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  std::vector<int64_t> bias_sizes{out_channels};
  auto [gi, gw, gb] = at::convolution_backward(as_host(grad_output), as_host(input), as_host(weight), bias_sizes,
                                               stride, padding, dilation, transposed, output_padding, groups,
                                               output_mask);
  auto d = input.device().index();
  return {from_host(gi, d), from_host(gw, d), from_host(gb, d)};
}  // synchronous device: nothing to track

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("record_stream", record_stream);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  m.impl("histc", histc_int);
  m.impl("histc.out", histc_out);
  m.impl("convolution_overrideable", convolution);
  m.impl("convolution_backward_overrideable", convolution_backward);
}

} // namespace neuron

namespace neuron {
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
} // namespace neuron
