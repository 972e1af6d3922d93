// Copies between a neuron tensor and a CPU tensor, or between NeuronCores.
//
// Both sides live in host memory, so one memcpy (contiguous, same dtype) or
// one host copy_ (strided, dtype conversion, broadcast) does it, with no
// staging buffer.
#include "aten/native/Native.h"
#include "core/Device.h"
#include "core/HostBridge.h"
#include "runtime/Runtime.h"

#include <ATen/ATen.h>

namespace neuron::native {
namespace {

bool is_dense_copy(const at::Tensor& src, const at::Tensor& dst) {
  return src.dtype() == dst.dtype() && src.sizes() == dst.sizes() && src.is_contiguous() &&
         dst.is_contiguous() && src.is_conj() == dst.is_conj() && src.is_neg() == dst.is_neg();
}

} // namespace

at::Tensor as_host(const at::Tensor& t) {
  if (t.device().type() == kNeuron) return host_alias(t);
  TORCH_CHECK(t.is_cpu(), "Copy between neuron and ", t.device(), " is not supported: go through the CPU");
  return t;
}

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

} // namespace neuron::native
