// Copies between a neuron tensor and a CPU tensor, or between NeuronCores.
//
// A dense copy (contiguous, same dtype) is one runtime copy with its direction;
// anything else (strided, dtype conversion, broadcast) is one host copy_ over
// the host bridge's aliases.
#include "aten/native/Native.h"
#include "aten/native/OpTracking.h"
#include "aten/native/NeuronDtypeRules.h"
#include "core/Device.h"
#include "core/Generator.h"
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

namespace {

void* allocation(const at::Tensor& t) { return const_cast<void*>(t.storage().data()); }
size_t byte_offset(const at::Tensor& t) { return static_cast<size_t>(t.storage_offset()) * t.itemsize(); }

void dense_copy(const at::Tensor& src, const at::Tensor& dst) {
  bool from_device = src.device().type() == kNeuron, to_device = dst.device().type() == kNeuron;
  TORCH_CHECK((from_device || src.is_cpu()) && (to_device || dst.is_cpu()), "Copy between ", src.device(), " and ",
              dst.device(), " is not supported: go through the CPU");
  size_t n = src.nbytes();
  if (from_device && to_device) {
    rt::copy_device_to_device(allocation(dst), byte_offset(dst), allocation(src), byte_offset(src), n);
  } else if (to_device) {
    rt::copy_host_to_device(allocation(dst), byte_offset(dst), src.const_data_ptr(), n);
  } else {
    rt::copy_device_to_host(dst.mutable_data_ptr(), allocation(src), byte_offset(src), n);
  }
}

} // namespace

at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool /*non_blocking*/) {
  // Every copy_ with a neuron tensor ends here. Recorded inside registered ops too: TorchNeuron's C++ copy
  // kernel logs every call (a CPU -> neuron .to() reports _to_copy and copy_).
  NEURON_TRACK_ALLOCATION("aten::copy_");
  const bool to_neuron = dst.device().type() == kNeuron;
  // As TorchNeuron (and nrt_tensor_copy): a device-to-device copy stays on one NeuronCore.
  TORCH_CHECK(!(to_neuron && src.device().type() == kNeuron && src.device() != dst.device()),
              "Device-to-device copy requires tensors on same Neuron core: ", src.device(), " -> ", dst.device(),
              ". Copy through the host (t.cpu().to('", dst.device(), "')), as on TorchNeuron, or keep both on one "
              "core (under torchrun each rank uses only its own core).");
  if (dst.numel() == 0) return dst;
  if (to_neuron && dst.scalar_type() == at::kBFloat16 && src.scalar_type() == at::kFloat &&
      dtype_rules::stochastic_rounding() && !src.is_conj() && !src.is_neg()) {
    // NEURON_RT_STOCHASTIC_ROUNDING_EN=1: fp32 -> bf16 rounds stochastically, from the core's RNG.
    at::Tensor s = as_host(src);
    if (s.sizes() != dst.sizes()) s = s.expand(dst.sizes());
    dtype_rules::stochastic_round_to_bf16(host_alias(dst), s, host_engine(default_generator(dst.device().index())));
    return dst;
  }
  if (is_dense_copy(src, dst)) {
    dense_copy(src, dst);
  } else {
    as_host(dst).copy_(as_host(src));
  }
  // Neuron's int64 rule holds from the moment a value reaches the device (int64 within int32). A float64
  // copy keeps its bytes, as on TorchNeuron (its 64-bit casts and transfers go through the CPU,
  // python_ops/cast_policy.py): only ops compute float64 in float32 (the TORCHNEURON_FP64 rule on results).
  if (to_neuron && dst.scalar_type() != at::kDouble && dtype_rules::result_has_rule(dst.scalar_type()))
    dtype_rules::apply_to_result("aten::copy_ (to neuron)", host_alias(dst), false);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& src, const at::Tensor& dst) {
  if (dst.sizes() != src.sizes()) resize_(dst, src.sizes(), std::nullopt);
  return copy_from(src, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  NEURON_TRACK_OP("aten::_local_scalar_dense");
  return at::_local_scalar_dense(host_alias(self));
}

} // namespace neuron::native
