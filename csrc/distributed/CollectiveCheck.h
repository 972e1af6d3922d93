// Before a collective moves data, the ranks of the group agree that they run
// the same collective on tensors of the same shape and dtype.
//
// Gloo does not check this itself: a size mismatch aborts a process from
// gloo's I/O thread (std::terminate, nothing to catch), and a same-sized dtype
// mismatch or a mismatched broadcast completes with garbage. Each rank
// therefore posts a small signature of its collective and compares it with
// everyone's; a disagreement raises, on every rank, an error naming what each
// rank ran. Ranks on one host post through shared memory (SignatureBoard.h,
// microseconds); a group spanning hosts all-gathers through gloo (one small
// collective). TORCHNEURON_COLLECTIVE_CHECKS=0 turns the check off,
// =network forces the gloo way (tests of multi-host groups on one machine).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "distributed/SignatureBoard.h"

#include <array>
#include <string>

namespace neuron::distributed {

struct CollectiveSignature {
  static constexpr int kDims = 4;  // shape dims recorded for the message; a hash covers all of them
  c10d::OpType op = c10d::OpType::UNKNOWN;
  int64_t reduce_op = -1;          // c10d::ReduceOp::RedOpType, or -1
  int64_t root = -1;
  int64_t dtype = -1;              // at::ScalarType of the example tensor, or -1
  int64_t tensors = 0;             // tensors in the call (coalesced / list forms)
  int64_t numel = -1;              // elements of all data the call sends or receives, or -1: may differ by rank
  int64_t ndim = -1;               // of the example tensor, or -1: not recorded
  std::array<int64_t, kDims> dims{};
  int64_t shape_hash = 0;

  // `example` is the tensor every rank must hold alike (the input, or the
  // output of a scatter); `numel` totals the rest of the call.
  static CollectiveSignature of(c10d::OpType op, const at::Tensor& example, int64_t tensors, int64_t numel);
  CollectiveSignature& with_reduce(int64_t reduce) { reduce_op = reduce; return *this; }
  CollectiveSignature& with_root(int64_t r) { root = r; return *this; }
  // For collectives whose shapes legitimately differ by rank (uneven all_to_all): dtype and op only.
  CollectiveSignature& any_shape();

  std::string describe() const;
};

enum class CheckMode { kOff, kAuto, kNetwork };
CheckMode collective_check_mode();  // from TORCHNEURON_COLLECTIVE_CHECKS, read once

// Blocks until every rank of the group has posted its signature, on `board`
// when there is one, else through `host`; throws a c10::DistBackendError if
// they differ, or if a peer exits or `timeout` passes first. `name` is the
// group's name for the message.
void check_same_collective(c10d::Backend& host, SignatureBoard* board, std::chrono::milliseconds timeout,
                           const CollectiveSignature& mine, const std::string& name);

} // namespace neuron::distributed
