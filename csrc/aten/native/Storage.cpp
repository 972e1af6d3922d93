// Storage surgery on neuron tensors: resize_, the set_ family, and the
// shallow-copy rule that keeps Parameter identity across module.to("neuron").
#include "aten/native/Native.h"
#include "aten/native/OpTracking.h"
#include "core/Allocator.h"
#include "core/Device.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>

namespace neuron::native {
namespace {

// Grow the storage when the new geometry needs more bytes than it has.
void ensure_storage(const at::Tensor& self) {
  auto* impl = self.unsafeGetTensorImpl();
  if (impl->numel() == 0) return;
  size_t needed = at::detail::computeStorageNbytes(impl->sizes(), impl->strides(), impl->dtype().itemsize(),
                                                  impl->storage_offset());
  auto* storage = impl->unsafe_storage().unsafeGetStorageImpl();
  if (needed > storage->nbytes()) resize_bytes(storage, needed);
}

} // namespace

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size, std::optional<at::MemoryFormat> memory_format) {
  NEURON_TRACK_OP("aten::resize_");
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format) impl->empty_tensor_restride(*memory_format);
  ensure_storage(self);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, at::Storage source, int64_t offset, at::IntArrayRef size,
                        at::IntArrayRef stride) {
  NEURON_TRACK_OP("aten::set_");  // every set_ overload ends here
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
  // PyTorch's own check says only that the devices differ; name the argument and the fix, in the words of
  // TorchNeuron's device check ("... expected neuron").
  TORCH_CHECK(src.device().type() == self.device().type(), "set_: the source tensor is on ", src.device().type(),
              " device, expected neuron: a neuron tensor can only take the storage of another neuron tensor. "
              "Move the source first, e.g. t.set_(source.to(\"", self.device(), "\")).");
  return set_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, device_allocator(), true);
  return set_storage(self, empty, 0, {0}, {});
}

// Dense neuron and CPU tensors share one TensorImpl layout, so `param.data =
// neuron_tensor` may swap storage in place. This keeps Parameter identity
// across module.to("neuron"), as for CUDA (optimizers and PEFT rely on it).
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  NEURON_TRACK_OP("aten::_has_compatible_shallow_copy_type");
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && (t.is_cpu() || t.device().type() == kNeuron);
  };
  return dense(self) && dense(from);
}

// Kernels run synchronously on the host: no stream can still be using a storage.
void record_stream(at::Tensor&, c10::Stream) {}

} // namespace neuron::native
