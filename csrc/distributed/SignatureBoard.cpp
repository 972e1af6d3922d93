#include "distributed/SignatureBoard.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <climits>

#include <unistd.h>

namespace neuron::distributed {
namespace {

// Collectives that may be in flight at once per group (async ones, each checked when it completes).
constexpr uint32_t kSlots = 16;

// One slot per collective in flight; collective i uses slot i % kSlots. Followed by the
// released stamps (uint32 per rank) and the rows (kMaxFields int64 per rank).
struct Slot {
  uint32_t arrived;    // futex word: posts to this slot so far, all its uses together (wraps)
  uint32_t sleepers;   // ranks asleep on `arrived`: the last to post wakes them only if any
  uint64_t first;      // (use + 1) << 32 | rank of the first rank to post that use: the reference
};

size_t released_offset() { return sizeof(Slot); }
size_t slot_rows_offset(int size) { return (released_offset() + sizeof(uint32_t) * size + 63) / 64 * 64; }
size_t slot_bytes(int size) {
  return (slot_rows_offset(size) + sizeof(int64_t) * size * SignatureBoard::kMaxFields + 63) / 64 * 64;
}

size_t board_bytes(int size) { return kSlots * slot_bytes(size); }

} // namespace

std::unique_ptr<SignatureBoard> SignatureBoard::connect(c10d::Store& store, int rank, int size) {
  auto segment = SharedSegment::connect(store, "check", rank, size, board_bytes(size));
  if (!segment) return nullptr;
  return std::unique_ptr<SignatureBoard>(new SignatureBoard(std::move(segment), rank, size));
}

SignatureBoard::SignatureBoard(std::unique_ptr<SharedSegment> segment, int rank, int size)
    : segment_(std::move(segment)), rank_(rank), size_(size), cpu_per_rank_(has_cpu_per_rank(size)) {}

SignatureBoard::~SignatureBoard() = default;

char* SignatureBoard::slot(uint32_t index) const {
  return segment_->data() + static_cast<size_t>(index % kSlots) * slot_bytes(size_);
}

SignatureBoard::Round SignatureBoard::post(const int64_t* mine, int n_fields, std::chrono::milliseconds timeout) {
  TORCH_INTERNAL_ASSERT(n_fields <= kMaxFields);
  std::lock_guard<std::mutex> guard(mutex_);
  Round round;
  round.index = next_++;
  char* s = slot(round.index);
  const uint32_t use = round.index / kSlots;  // this slot's use count before this round
  // The slot's previous use must be over on every rank before its rows are overwritten. It almost
  // always is: that was kSlots collectives ago.
  if (use > 0) {
    auto* released = reinterpret_cast<uint32_t*>(s + released_offset());
    const auto start = std::chrono::steady_clock::now();
    auto next_check = start + SharedSegment::kCheckEvery;
    for (int r = 0; r < size_; ++r) {
      std::atomic_ref<uint32_t> stamp(released[r]);
      while (static_cast<int32_t>(stamp.load(std::memory_order_acquire) - use) < 0) {
        usleep(200);
        segment_->throw_if_peers_lost(start, timeout, next_check);
      }
    }
  }
  auto* rows = reinterpret_cast<int64_t*>(s + slot_rows_offset(size_));
  std::copy(mine, mine + n_fields, rows + static_cast<size_t>(rank_) * kMaxFields);
  // Claim the reference place if nobody posted this use yet. The row is written before (release), so
  // whoever reads `first` (acquire) can read the reference's row.
  auto* header = reinterpret_cast<Slot*>(s);
  std::atomic_ref<uint64_t> first(header->first);
  const uint64_t claim = (static_cast<uint64_t>(use + 1) << 32) | static_cast<uint32_t>(rank_);
  uint64_t seen = first.load(std::memory_order_acquire);
  while (static_cast<uint32_t>(seen >> 32) != use + 1 &&
         !first.compare_exchange_weak(seen, claim, std::memory_order_acq_rel, std::memory_order_acquire)) {
  }
  round.reference = static_cast<uint32_t>(seen >> 32) == use + 1 ? static_cast<int>(seen & 0xffffffffu) : rank_;
  const uint32_t target = static_cast<uint32_t>(size_) * (use + 1);
  // The last to post wakes the ranks waiting for everyone.
  SharedSegment::arrive(&header->arrived, &header->sleepers, target);
  round.rows = rows;
  return round;
}

void SignatureBoard::wait_all(const Round& round, std::chrono::milliseconds timeout) {
  auto* header = reinterpret_cast<Slot*>(slot(round.index));
  // Complete when the slot has seen all ranks post its use number `use`. With the check on, this wait is
  // also the barrier of a barrier() and of every collective that waits for all signatures: it polls
  // and sleeps as the data path's barrier does.
  const uint32_t target = static_cast<uint32_t>(size_) * (round.index / kSlots + 1);
  segment_->wait_arrivals(&header->arrived, &header->sleepers, target, cpu_per_rank_, timeout);
}

void SignatureBoard::release(const Round& round) {
  char* s = slot(round.index);
  auto* released = reinterpret_cast<uint32_t*>(s + released_offset());
  std::atomic_ref<uint32_t>(released[rank_]).store(round.index / kSlots + 1, std::memory_order_release);
}

} // namespace neuron::distributed
