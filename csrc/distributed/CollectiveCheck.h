// Before a collective moves data, the ranks of the group agree that they run
// the same collective on tensors of the same shape and dtype.
//
// Gloo does not check this itself: a size mismatch aborts a process from
// gloo's I/O thread (std::terminate, nothing to catch), and a same-sized dtype
// mismatch or a mismatched broadcast completes with garbage. Each rank
// therefore posts a small signature of its collective and compares it with
// everyone's; a disagreement raises, on every rank, an error naming what each
// rank ran.
//
// A group spanning hosts all-gathers the signatures through gloo (one small
// collective) and compares before any data moves. Ranks of one host post
// through shared memory (SignatureBoard.h), and there the rank that posts first
// (the reference) does not wait for the others: waiting would cost every
// collective the ranks' arrival skew, which gloo otherwise hides (an early rank
// already sends its data), about 10% of a 1 MiB all_reduce. The others compare
// with the reference as they post:
//  * all_reduce, all_gather_into_tensor and reduce_scatter_tensor (single
//    tensor), which no rank can finish before every rank entered: a rank that
//    agrees with the reference starts at once, and checks everyone's signature
//    when its collective has completed; a rank that disagrees runs the
//    reference's collective on zero-filled stand-in buffers (so that gloo,
//    which aborts the process on mismatched sizes, sees matching ones), then
//    every rank raises. The refused collective's outputs are unspecified.
//  * every other collective waits for all signatures and compares before any
//    data moves (as the gloo way).
// A rank that refuses its own arguments (CollectiveArguments.h: a bad root, an
// unsupported reduction, a list of the wrong length, ... some of which only the
// root holds) posts a signature marked as refused, so that every rank raises
// rather than waiting for it.
// TORCHNEURON_COLLECTIVE_CHECKS=0 turns the check off, =network forces the gloo
// way (tests of multi-host groups on one machine).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "distributed/SignatureBoard.h"

#include <array>
#include <chrono>
#include <memory>
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
  int64_t example_numel = -1;      // of the example tensor (what a stand-in needs), or -1
  std::array<int64_t, kDims> dims{};
  int64_t shape_hash = 0;
  int64_t refused = 0;             // 1: this rank refuses the call's arguments (CollectiveArguments.h)

  // `example` is the tensor every rank must hold alike (the input, or the
  // output of a scatter); `numel` totals the rest of the call.
  static CollectiveSignature of(c10d::OpType op, const at::Tensor& example, int64_t tensors, int64_t numel);
  CollectiveSignature& with_reduce(int64_t reduce) { reduce_op = reduce; return *this; }
  CollectiveSignature& with_root(int64_t r) { root = r; return *this; }
  // For collectives whose shapes legitimately differ by rank (uneven all_to_all): dtype and op only.
  CollectiveSignature& any_shape();
  CollectiveSignature& with_refusal() { refused = 1; return *this; }

  std::string describe() const;
};

enum class CheckMode { kOff, kAuto, kNetwork };
CheckMode collective_check_mode();  // from TORCHNEURON_COLLECTIVE_CHECKS, read once

// The gloo way: blocks until every rank of `host`'s group has sent its
// signature; throws a c10::DistBackendError if they differ, or if a peer exits
// or the host backend's timeout passes first. `name` is the group's name for the message.
void check_same_collective(c10d::Backend& host, const CollectiveSignature& mine, const std::string& name);

// Whether a rank may start this collective before the others posted (see above).
bool starts_before_all_posted(const CollectiveSignature& s);

// The shared-memory way, for one collective: posting happens in the constructor.
class BoardCheck {
 public:
  BoardCheck(std::shared_ptr<SignatureBoard> board, const CollectiveSignature& mine, std::chrono::milliseconds timeout,
             int rank, int size, std::string name);
  // This rank agrees with the reference and may start its collective now; call finish() once it completed.
  bool start_now() const { return start_now_; }
  // Non-null: the reference started this collective: run it on stand-in buffers, then finish() (which raises).
  const CollectiveSignature* stand_in() const { return stand_in_ ? &reference_ : nullptr; }
  // Waits for every rank's signature and releases the board's slot; throws a
  // c10::DistBackendError if they differ, or if a peer exits or `timeout`
  // passes first. Call exactly once.
  void finish();

 private:
  std::shared_ptr<SignatureBoard> board_;
  SignatureBoard::Round round_;
  std::array<int64_t, SignatureBoard::kMaxFields> mine_{};
  CollectiveSignature signature_, reference_;
  std::chrono::milliseconds timeout_;
  int rank_, size_;
  std::string name_;
  bool start_now_ = false, stand_in_ = false;
};

} // namespace neuron::distributed
