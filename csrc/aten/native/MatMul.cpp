// Matrix multiplies (mm, addmm, bmm): the host's BLAS kernel on host aliases, without the boxed fallback.
//
// They are the most frequent ops of a model that reach the generic path (45 of its 99 calls in a
// training step of a small Llama), and the fallback's generic work (the argument stack, the per-op
// lookup, a scan of every argument, adopting a fresh output) is most of what the device adds to a
// small one. Here the CPU kernel reads the operands through their host aliases and allocates its result
// on the host, which the host bridge adopts as device memory (no copy where the runtime can adopt; one
// wrapper fewer than writing into a device output through its alias): the same kernel, on the same
// bytes, as a CPU tensor's call, so results are bit-equal.
// Only the common case takes this path: every tensor a neuron tensor of one core, one floating dtype
// without a Neuron dtype rule (float32, bfloat16, float16); the rest (mixed devices or dtypes,
// float64, integers, complex) takes the boxed fallback, whose checks and messages apply.
#include "aten/native/HostKernels.h"
#include "aten/native/Native.h"

#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>

namespace neuron::native {
namespace {

using host_kernels::boxed_fallback;
using host_kernels::on_host_alias_path;
using host_kernels::record_signature;

// TorchNeuron checks mm's shapes before lowering it, in the words of PyTorch's meta function; the CPU
// kernel's own words follow.
void check_mm_shapes(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "mm: a must be 2D and b must be 2D, got ", a.dim(), "-D and ", b.dim(),
              "-D tensors (self must be a matrix). Use torch.matmul for batched or vector operands, or reshape them "
              "to [rows, cols].");
  TORCH_CHECK(a.size(1) == b.size(0), "mm: a and b must have same reduction dim, but got [", a.size(0), ", ",
              a.size(1), "] X [", b.size(0), ", ", b.size(1), "] (mat1 and mat2 shapes cannot be multiplied). The "
              "columns of the first must equal the rows of the second: transpose or reshape one of them.");
}

} // namespace

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  check_mm_shapes(self, mat2);
  if (!on_host_alias_path({&self, &mat2}) || self.dim() != 2 || mat2.dim() != 2)
    return boxed_fallback<ATEN_OP(mm)>(self, mat2);
  record_signature<ATEN_OP(mm)>(self, mat2);
  // the CPU kernel checks the shapes
  return from_host(at::cpu::mm(host_alias(self), host_alias(mat2)), self.device().index());
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  if (!on_host_alias_path({&self, &mat1, &mat2}) || mat1.dim() != 2 || mat2.dim() != 2)
    return boxed_fallback<ATEN_OP(addmm)>(self, mat1, mat2, beta, alpha);
  record_signature<ATEN_OP(addmm)>(self, mat1, mat2, beta, alpha);
  return from_host(at::cpu::addmm(host_alias(self), host_alias(mat1), host_alias(mat2), beta, alpha),
                   mat1.device().index());
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  if (!on_host_alias_path({&self, &mat2}) || self.dim() != 3 || mat2.dim() != 3)
    return boxed_fallback<ATEN_OP(bmm)>(self, mat2);
  record_signature<ATEN_OP(bmm)>(self, mat2);
  return from_host(at::cpu::bmm(host_alias(self), host_alias(mat2)), self.device().index());
}

} // namespace neuron::native
