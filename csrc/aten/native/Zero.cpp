// zero_ of a dense neuron tensor: one memset of its bytes through the host bridge, as the CPU's own zero_
// does for a dense CPU tensor (its memset path; larger ones fill with 0, the same bytes).
//
// A model zeroes a dozen fresh buffers per training step (zeros(), slice and select backward), and through
// the boxed fallback each cost a host alias and the fallback's generic work. Other calls (overlapping or
// strided memory, conjugate or negative views, dtypes with a Neuron dtype rule, float64 whose modes look at
// inputs) take the fallback, whose checks apply.
#include "aten/native/HostKernels.h"
#include "aten/native/Native.h"
#include "aten/native/NeuronDtypeRules.h"

#include <ATen/ops/zero_native.h>

#include <cstring>

namespace neuron::native {

at::Tensor& zero_(at::Tensor& self) {
  if (self.device().type() != kNeuron || self.layout() != at::kStrided || !self.is_non_overlapping_and_dense() ||
      self.is_conj() || self.is_neg() || self.scalar_type() == at::kDouble ||
      dtype_rules::result_has_rule(self.scalar_type()))
    return host_kernels::boxed_fallback<ATEN_OP(zero_)>(self);
  host_kernels::record_signature<ATEN_OP(zero_)>(self);
  if (const size_t nbytes = self.numel() * self.itemsize()) {
    HostAccess access;
    access.open(self);
    std::memset(self.data_ptr(), 0, nbytes);  // dense: numel elements from the lowest address, data_ptr
  }
  return self;
}

} // namespace neuron::native
