// The element-wise reduction of the shared-memory collectives, in a fixed rank order.
//
// dst = op(...op(op(src[0], src[1]), src[2])..., src[n-1]), element by element, with PyTorch's own
// CPU kernels (vectorized; bfloat16/float16 round after every step, as their add does). The order is
// the same on every rank and in every run, so a reduced tensor is bit-identical on all ranks and
// from run to run. Gloo's ring sums in an order that depends on the chunk, so float results may
// differ from gloo's in the last bits (integers are exact either way).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace neuron::distributed {

// Whether reduce_in_rank_order runs `op` on `dtype`: sums, products, min/max and AVG of floating
// types; sums, products, min/max and bitwise ops of integer types. Others (bool, complex, bitwise
// ops on floats) stay with the host backend, which runs or rejects them as it always has.
bool reducible_in_rank_order(at::ScalarType dtype, c10d::ReduceOp::RedOpType op);

// `count` elements. dst may be one of the sources (same index range). AVG divides the sum by n.
void reduce_in_rank_order(void* dst, const void* const* srcs, int n, int64_t count, at::ScalarType dtype,
                          c10d::ReduceOp::RedOpType op);

} // namespace neuron::distributed
