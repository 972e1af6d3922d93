// Matrix multiplies (mm, addmm, bmm): the host's BLAS kernel on host aliases, without the boxed fallback.
//
// They are the most frequent ops of a model that reach the generic path (45 of its 99 calls in a
// training step of a small Llama), and the fallback's generic work (the argument stack, the per-op
// lookup, a scan of every argument, adopting a fresh output) is most of what the device adds to a
// small one. Here the output is allocated on the core first and the CPU kernel writes into it through
// its host alias: the same kernel, on the same bytes, as a CPU tensor's call, so results are bit-equal.
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
using host_kernels::record_signature;

bool on_this_path(std::initializer_list<const at::Tensor*> tensors) {
  const at::Tensor& first = *tensors.begin()[0];
  if (first.device().type() != kNeuron) return false;
  const auto dtype = first.scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) return false;
  for (const at::Tensor* t : tensors) {
    if (t->device() != first.device() || t->scalar_type() != dtype || t->layout() != at::kStrided) return false;
  }
  return true;
}

// A fresh contiguous tensor on `like`'s core, and its host alias for the CPU kernel to write.
std::pair<at::Tensor, at::Tensor> output(const at::Tensor& like, at::IntArrayRef sizes) {
  at::Tensor out = empty_on_core(like.device().index(), sizes, std::nullopt, like.scalar_type(), std::nullopt);
  at::Tensor host = host_alias(out);
  return {std::move(out), std::move(host)};
}

} // namespace

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  if (!on_this_path({&self, &mat2}) || self.dim() != 2 || mat2.dim() != 2)
    return boxed_fallback<ATEN_OP(mm)>(self, mat2);
  record_signature<ATEN_OP(mm)>(self, mat2);
  auto [out, host] = output(self, {self.size(0), mat2.size(1)});
  at::cpu::mm_out(host, host_alias(self), host_alias(mat2));  // the CPU kernel checks the shapes
  return out;
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  if (!on_this_path({&self, &mat1, &mat2}) || mat1.dim() != 2 || mat2.dim() != 2)
    return boxed_fallback<ATEN_OP(addmm)>(self, mat1, mat2, beta, alpha);
  record_signature<ATEN_OP(addmm)>(self, mat1, mat2, beta, alpha);
  auto [out, host] = output(mat1, {mat1.size(0), mat2.size(1)});
  at::cpu::addmm_out(host, host_alias(self), host_alias(mat1), host_alias(mat2), beta, alpha);
  return out;
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  if (!on_this_path({&self, &mat2}) || self.dim() != 3 || mat2.dim() != 3)
    return boxed_fallback<ATEN_OP(bmm)>(self, mat2);
  record_signature<ATEN_OP(bmm)>(self, mat2);
  auto [out, host] = output(self, {self.size(0), self.size(1), mat2.size(2)});
  at::cpu::bmm_out(host, host_alias(self), host_alias(mat2));
  return out;
}

} // namespace neuron::native
