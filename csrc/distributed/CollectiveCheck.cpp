#include "distributed/CollectiveCheck.h"

#include "core/DtypeName.h"
#include "distributed/CollectiveError.h"

#include <c10/util/hash.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

namespace neuron::distributed {
namespace {

constexpr int64_t kMagic = 0x4e4555524f4e31;  // "NEURON1": tells a signature from stray bytes
constexpr int kFields = 11 + CollectiveSignature::kDims;
static_assert(kFields <= SignatureBoard::kMaxFields);

std::array<int64_t, kFields> pack(const CollectiveSignature& s) {
  std::array<int64_t, kFields> f{kMagic, static_cast<int64_t>(s.op), s.reduce_op, s.root, s.dtype,
                                 s.tensors, s.numel, s.ndim};
  for (int i = 0; i < CollectiveSignature::kDims; ++i) f[8 + i] = s.dims[i];
  f[8 + CollectiveSignature::kDims] = s.shape_hash;
  f[9 + CollectiveSignature::kDims] = s.example_numel;
  f[10 + CollectiveSignature::kDims] = s.refused;
  return f;
}

CollectiveSignature unpack(const int64_t* f) {
  CollectiveSignature s;
  s.op = static_cast<c10d::OpType>(f[1]);
  s.reduce_op = f[2];
  s.root = f[3];
  s.dtype = f[4];
  s.tensors = f[5];
  s.numel = f[6];
  s.ndim = f[7];
  for (int i = 0; i < CollectiveSignature::kDims; ++i) s.dims[i] = f[8 + i];
  s.shape_hash = f[8 + CollectiveSignature::kDims];
  s.example_numel = f[9 + CollectiveSignature::kDims];
  s.refused = f[10 + CollectiveSignature::kDims];
  return s;
}

const char* op_name(c10d::OpType op) {
  switch (op) {
    case c10d::OpType::BROADCAST: return "broadcast";
    case c10d::OpType::ALLREDUCE: return "all_reduce";
    case c10d::OpType::ALLREDUCE_COALESCED: return "all_reduce_coalesced";
    case c10d::OpType::REDUCE: return "reduce";
    case c10d::OpType::ALLGATHER: return "all_gather";
    case c10d::OpType::_ALLGATHER_BASE: return "all_gather_into_tensor";
    case c10d::OpType::ALLGATHER_COALESCED: return "all_gather_coalesced";
    case c10d::OpType::COALESCED: return "all_gather_into_tensor_coalesced";
    case c10d::OpType::GATHER: return "gather";
    case c10d::OpType::SCATTER: return "scatter";
    case c10d::OpType::REDUCE_SCATTER: return "reduce_scatter";
    case c10d::OpType::_REDUCE_SCATTER_BASE: return "reduce_scatter_tensor";
    case c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED: return "reduce_scatter_tensor_coalesced";
    case c10d::OpType::ALLTOALL_BASE: return "all_to_all_single";
    case c10d::OpType::ALLTOALL: return "all_to_all";
    case c10d::OpType::BARRIER: return "barrier";
    case c10d::OpType::SEND: return "send";
    case c10d::OpType::RECV: return "recv";
    default: return "collective";
  }
}

const char* reduce_name(int64_t op) {
  static const char* names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
  return op >= 0 && op < 9 ? names[op] : "?";
}

std::string dtype_name(int64_t dtype) { return python_dtype_name(static_cast<at::ScalarType>(dtype)); }

bool same(const int64_t* a, const int64_t* b) { return std::equal(a, a + kFields, b); }

} // namespace

CollectiveSignature CollectiveSignature::of(c10d::OpType op, const at::Tensor& example, int64_t tensors,
                                            int64_t numel) {
  CollectiveSignature s;
  s.op = op;
  s.tensors = tensors;
  s.numel = numel;
  if (example.defined()) {
    s.dtype = static_cast<int64_t>(example.scalar_type());
    s.ndim = example.dim();
    s.example_numel = example.numel();
    size_t h = 0;
    for (int64_t i = 0; i < example.dim(); ++i) {
      if (i < kDims) s.dims[i] = example.size(i);
      h = c10::hash_combine(h, static_cast<size_t>(example.size(i)));
    }
    s.shape_hash = static_cast<int64_t>(h);
  }
  return s;
}

CollectiveSignature& CollectiveSignature::any_shape() {
  numel = -1;
  ndim = -1;
  example_numel = -1;
  dims.fill(0);
  shape_hash = 0;
  return *this;
}

std::string CollectiveSignature::describe() const {
  std::ostringstream out;
  out << op_name(op);
  if (reduce_op >= 0) out << "(" << reduce_name(reduce_op) << ")";
  if (dtype >= 0) {
    out << " " << dtype_name(dtype);
    if (ndim >= 0) {
      out << "[";
      for (int64_t i = 0; i < ndim && i < kDims; ++i) out << (i ? ", " : "") << dims[i];
      if (ndim > kDims) out << ", ...";
      out << "]";
    }
  }
  if (tensors > 1) out << " x" << tensors << " tensors";
  int64_t example_numel = ndim >= 0 && ndim <= kDims ? 1 : -1;
  for (int64_t i = 0; i < ndim && i < kDims; ++i) example_numel *= dims[i];
  if (numel >= 0 && numel != example_numel) out << ", " << numel << " elements in all";
  if (root >= 0) out << ", root " << root;
  if (refused) out << ", with arguments it refused (see that rank's error)";
  return out.str();
}

CheckMode collective_check_mode() {
  static const CheckMode mode = [] {
    const char* v = std::getenv("TORCHNEURON_COLLECTIVE_CHECKS");
    std::string value = v ? v : "";
    if (value == "0") return CheckMode::kOff;
    if (value == "network") return CheckMode::kNetwork;
    return CheckMode::kAuto;
  }();
  return mode;
}

namespace {

[[noreturn]] void raise_meeting_failed(const CollectiveSignature& mine, int rank, int size, const std::exception& e) {
  raise_collective_failure(c10::str(mine.describe(), " on rank ", rank, " of ", size), message_of(e),
                           " while the ranks met to start it");
}

// "" if all `size` rows (`stride` apart) equal `mine`, else the message that names what each rank ran.
std::string disagreement(const int64_t* rows, int stride, int size, int rank, const int64_t* mine,
                         const std::string& name) {
  bool agree = true;
  for (int r = 0; r < size && agree; ++r) agree = same(rows + r * stride, mine);
  if (agree) return "";
  // Group the ranks by what they ran, for a message that shows the disagreement at a glance.
  std::map<std::string, std::vector<int>> by_call;
  for (int r = 0; r < size; ++r) {
    const int64_t* row = rows + r * stride;
    by_call[row[0] == kMagic ? unpack(row).describe() : "something other than a checked collective"].push_back(r);
  }
  std::ostringstream msg;
  msg << "neuron backend: the ranks of process group '" << name << "' disagree on the collective to run: ";
  bool first = true;
  for (const auto& [call, ranks] : by_call) {
    msg << (first ? "" : "; ") << (ranks.size() > 1 ? "ranks " : "rank ");
    for (size_t i = 0; i < ranks.size(); ++i) msg << (i ? ", " : "") << ranks[i];
    msg << " ran " << call;
    first = false;
  }
  msg << ". Every rank of a group must issue the same collectives in the same order, with tensors of the same "
         "shape and dtype (an uneven last batch is a common cause). This rank is "
      << rank << ". (Checked by TorchNeuron; TORCHNEURON_COLLECTIVE_CHECKS=0 skips the check.)";
  return msg.str();
}

} // namespace

void check_same_collective(c10d::Backend& host, const CollectiveSignature& mine, const std::string& name) {
  const int size = host.getSize();
  const auto fields = pack(mine);
  auto send = at::empty({kFields}, at::kLong);
  std::copy(fields.begin(), fields.end(), send.data_ptr<int64_t>());
  auto all = at::empty({size * kFields}, at::kLong);
  try {
    host._allgather_base(all, send, c10d::AllgatherOptions())->wait();
  } catch (const std::exception& e) {
    raise_meeting_failed(mine, host.getRank(), size, e);
  }
  auto msg = disagreement(all.data_ptr<int64_t>(), kFields, size, host.getRank(), fields.data(), name);
  if (!msg.empty()) C10_THROW_ERROR(DistBackendError, msg);
}

bool starts_before_all_posted(const CollectiveSignature& s) {
  using c10d::OpType;
  return (s.op == OpType::ALLREDUCE || s.op == OpType::_ALLGATHER_BASE || s.op == OpType::_REDUCE_SCATTER_BASE) &&
         s.tensors == 1 && s.dtype >= 0 && s.example_numel >= 0 && !s.refused;
}

BoardCheck::BoardCheck(std::shared_ptr<SignatureBoard> board, const CollectiveSignature& mine,
                       std::chrono::milliseconds timeout, int rank, int size, std::string name)
    : board_(std::move(board)), signature_(mine), timeout_(timeout), rank_(rank), size_(size), name_(std::move(name)) {
  const auto fields = pack(mine);
  std::copy(fields.begin(), fields.end(), mine_.begin());
  try {
    round_ = board_->post(mine_.data(), kFields, timeout_);
  } catch (const std::exception& e) {
    raise_meeting_failed(signature_, rank_, size_, e);
  }
  const int64_t* reference = round_.rows + static_cast<size_t>(round_.reference) * SignatureBoard::kMaxFields;
  if (same(reference, mine_.data())) {
    start_now_ = starts_before_all_posted(mine);
  } else {
    reference_ = unpack(reference);
    stand_in_ = starts_before_all_posted(reference_);
  }
}

void BoardCheck::finish() {
  try {
    board_->wait_all(round_, timeout_);
  } catch (const std::exception& e) {
    raise_meeting_failed(signature_, rank_, size_, e);
  }
  // Read the rows before releasing them: once every rank released, the slot is reused.
  auto msg = disagreement(round_.rows, SignatureBoard::kMaxFields, size_, rank_, mine_.data(), name_);
  board_->release(round_);
  if (!msg.empty()) C10_THROW_ERROR(DistBackendError, msg);
}

} // namespace neuron::distributed
