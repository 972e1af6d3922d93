// histc of integer tensors: CUDA has it (Transformers' MoE routing counts
// tokens per expert with histc on int32 on every device but CPU/MPS); the
// host kernel has floating types only. Count in float, return the input dtype.
// (compile/host_graph.py puts the same semantics into compiled graphs.)
#include "aten/native/Native.h"
#include "aten/native/OpTracking.h"
#include "core/DtypeName.h"
#include "core/HostBridge.h"

#include <ATen/ATen.h>

namespace neuron::native {
namespace {
std::string dtype_name(at::ScalarType t) { return "torch." + python_dtype_name(t); }
} // namespace

at::Tensor histc_any_dtype(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  NEURON_TRACK_OP("aten::histc");
  at::Tensor h = as_host(self);
  bool integral = c10::isIntegralType(self.scalar_type(), /*includeBool=*/true);
  at::Tensor out = at::histc(integral ? h.to(at::kFloat) : h, bins, min, max);
  return from_host(integral ? out.to(self.scalar_type()) : out, self.device().index());
}

// An out= tensor must have the input's dtype, as on CPU (and in TorchNeuron, whose message names the dtypes
// as torch.float32): the integer histc above is for the functional form only.
at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                      at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(),
              "torch.histogram: input tensor and hist tensor should have the same dtype, but got input ",
              dtype_name(self.scalar_type()), " and hist ", dtype_name(out.scalar_type()),
              ". Pass an out tensor of dtype ", dtype_name(self.scalar_type()), ", or call histc without out=.");
  at::Tensor r = histc_any_dtype(self, bins, min, max);
  if (out.sizes() != r.sizes()) resize_(out, r.sizes(), std::nullopt);
  copy_from(r, out, false);
  return out;
}

} // namespace neuron::native
