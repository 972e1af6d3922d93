#include "distributed/PointToPoint.h"

#include "core/Device.h"
#include "core/HostBridge.h"
#include "distributed/CollectiveCheck.h"
#include "distributed/CollectiveError.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include <sys/uio.h>
#include <unistd.h>

namespace neuron::distributed {
namespace {

constexpr int kDims = CollectiveSignature::kDims;

// One side's end of a message, written by that side before it marks the slot.
struct End {
  int64_t pid;
  uint64_t address;  // of its bytes, in its process
  int64_t bytes;
  int64_t dtype;
  int64_t ndim;
  int64_t dims[kDims];
  int64_t shape_hash;
};

// A message slot of an ordered pair. `state` (a futex word) is (use << 8) | flags: `use` counts the messages the
// slot carried before this one, so a side posting message n waits for use n / kSlots (the previous message on the
// slot finished on both sides: the side that came first released it).
struct Slot {
  uint32_t state;
  uint32_t sleepers;  // ranks asleep on `state`: a change wakes them only if there are any (a system call saved)
  int32_t error;      // errno of the copy, when it failed
  End ends[2];        // the sender's, the receiver's
};

constexpr uint32_t kSent = 1, kReceived = 2, kDone = 4, kRefused = 8, kFailed = 16;
constexpr uint32_t kFlags = 0xff;

size_t slot_bytes() { return (sizeof(Slot) + 63) / 64 * 64; }

uint32_t use_of(uint64_t n) { return static_cast<uint32_t>(n / SharedMemoryPointToPoint::kSlots) & 0xffffffu; }

std::atomic_ref<uint32_t> state_of(Slot* s) { return std::atomic_ref<uint32_t>(s->state); }

// After a change of `state` (seq_cst): wakes the ranks asleep on it, if any.
void wake(Slot* s) {
  if (std::atomic_ref<uint32_t>(s->sleepers).load(std::memory_order_seq_cst) > 0) futex_wake_all_shared(&s->state);
}

// Returns the slot's state once `ready(state)`: polls briefly (longer when the group has a CPU per rank: a peer
// that is running answers within microseconds), then sleeps on it, registered in `sleepers` (seq_cst both: the
// peer's wake() either sees the registration or changed the word before futex_wait compares it). `lost()` runs
// every kCheckEvery of sleep: it throws if the peer exited or the timeout passed.
template <typename Ready, typename Lost>
uint32_t await_state(Slot* s, bool cpu_per_rank, Ready&& ready, Lost&& lost) {
  auto state = state_of(s);
  for (int i = 0, polls = cpu_per_rank ? 2000 : 64; i < polls; ++i) {
    const uint32_t now = state.load(std::memory_order_acquire);
    if (ready(now)) return now;
    cpu_relax();
  }
  std::atomic_ref<uint32_t> asleep(s->sleepers);
  for (;;) {
    asleep.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t now = state.load(std::memory_order_seq_cst);
    if (!ready(now)) futex_wait_shared(&s->state, now, SharedSegment::kCheckEvery);
    asleep.fetch_sub(1, std::memory_order_seq_cst);
    const uint32_t after = state.load(std::memory_order_acquire);
    if (ready(after)) return after;
    lost();
  }
}

End end_of(const at::Tensor& t, uint64_t address) {
  End e{};
  e.pid = static_cast<int64_t>(getpid());
  e.address = address;
  e.bytes = static_cast<int64_t>(t.nbytes());
  // Shape and dtype as the collectives' check records them.
  const auto s = CollectiveSignature::of(c10d::OpType::UNKNOWN, t, 1, t.numel());
  e.dtype = s.dtype;
  e.ndim = s.ndim;
  std::copy(s.dims.begin(), s.dims.end(), e.dims);
  e.shape_hash = s.shape_hash;
  return e;
}

bool agree(const End& a, const End& b) {
  if (a.bytes != b.bytes) return false;
  if (collective_check_mode() == CheckMode::kOff) return true;  // the sizes only: what keeps memory safe
  return a.dtype == b.dtype && a.ndim == b.ndim && a.shape_hash == b.shape_hash &&
         std::equal(a.dims, a.dims + kDims, b.dims);
}

std::string what(const End& e, c10d::OpType op) {
  CollectiveSignature s;
  s.op = op;
  s.dtype = e.dtype;
  s.ndim = e.ndim;
  s.tensors = 1;
  std::copy(e.dims, e.dims + kDims, s.dims.begin());
  return s.describe();
}

// Copies `bytes` between this process's `local` and `remote` in process `pid`: read (the receiver) or write (the
// sender). Returns 0, or the errno of the failure.
int copy_with_peer(bool read, int64_t pid, void* local, uint64_t remote, int64_t bytes) {
  auto* at = static_cast<char*>(local);
  while (bytes > 0) {
    iovec l{at, static_cast<size_t>(bytes)}, r{reinterpret_cast<void*>(remote), static_cast<size_t>(bytes)};
    const ssize_t n = read ? process_vm_readv(static_cast<pid_t>(pid), &l, 1, &r, 1, 0)
                           : process_vm_writev(static_cast<pid_t>(pid), &l, 1, &r, 1, 0);
    if (n <= 0) return n < 0 ? errno : EIO;
    at += n;
    remote += static_cast<uint64_t>(n);
    bytes -= n;
  }
  return 0;
}

} // namespace

// One side's part in one message: what it holds until the message is done, and how it ended.
struct SharedMemoryPointToPoint::Message {
  Slot* slot = nullptr;
  uint32_t use = 0;
  bool sending = false;
  int peer = -1;
  int rank = -1;
  std::string call;     // "send on rank 0 of 2 (Float[8] on neuron:0) to rank 1"
  at::Tensor user;      // the caller's tensor
  at::Tensor host;      // its host view (a neuron tensor's host alias: open for host access while held)
  at::Tensor dense;     // `host`, or its contiguous copy (a recv writes it back when done)
  bool done = false;
  std::string failure;  // why it failed ("" if it did not)

  // The outcome (the slot's flags once it is marked done), while this side may still read the slot: the refusal
  // names both ends.
  void conclude(uint32_t flags) {
    const End& sender = slot->ends[0];
    const End& receiver = slot->ends[1];
    const int src = sending ? rank : peer, dst = sending ? peer : rank;
    if (flags & kRefused) {
      failure = c10::str("rank ", src, "'s ", what(sender, c10d::OpType::SEND), " to rank ", dst, " met rank ", dst,
                         "'s ", what(receiver, c10d::OpType::RECV), " from rank ", src,
                         ": a recv must take the shape and dtype of the send it meets (the n-th send of "
                         "one rank to another meets the other's n-th recv from it, as with NCCL; tags are not "
                         "used). Nothing was transferred; later messages are unaffected. (Checked by TorchNeuron; "
                         "TORCHNEURON_COLLECTIVE_CHECKS=0 compares only the sizes.)");
    } else if (flags & kFailed) {
      failure = c10::str("copying the message from rank ", src, " to rank ", dst,
                         " between their processes failed: ", std::strerror(slot->error));
    } else if (!sending && !dense.is_same(host)) {
      host.copy_(dense);
    }
    done = true;
  }

  // The side that came first: done once the other side marked the slot; then it releases the slot.
  bool try_finish() {
    if (done) return true;
    const uint32_t flags = state_of(slot).load(std::memory_order_acquire);
    if (!(flags & kDone)) return false;
    conclude(flags);
    state_of(slot).store(static_cast<uint32_t>(((use + 1) & 0xffffffu) << 8), std::memory_order_seq_cst);
    wake(slot);  // a poster of the slot's next message may be waiting for it
    return true;
  }
};

// The work of a send or recv on the shared-memory path.
class PointToPointWork : public c10d::Work {
 public:
  PointToPointWork(std::shared_ptr<SharedMemoryPointToPoint> p2p, std::shared_ptr<SharedMemoryPointToPoint::Message> m)
      : c10d::Work(m->rank, m->sending ? c10d::OpType::SEND : c10d::OpType::RECV),
        p2p_(std::move(p2p)),
        message_(std::move(m)) {}

  bool isCompleted() override {
    std::lock_guard<std::mutex> guard(p2p_->mutex_);
    p2p_->progress();
    return message_->done;
  }
  bool isSuccess() const override { return message_->done && message_->failure.empty(); }
  std::vector<at::Tensor> result() override { return {message_->user}; }
  int sourceRank() const override { return message_->sending ? message_->rank : message_->peer; }

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override {
    const auto start = std::chrono::steady_clock::now();
    const auto limit = timeout == kNoTimeout ? p2p_->timeout_ : timeout;
    auto next_check = start + SharedSegment::kCheckEvery;
    for (;;) {
      uint32_t seen;
      {
        std::lock_guard<std::mutex> guard(p2p_->mutex_);
        p2p_->progress();
        if (message_->done) break;
        seen = state_of(message_->slot).load(std::memory_order_acquire);
      }
      // Any change of the slot: the peer posted or finished, or the slot's previous message was released.
      await_state(message_->slot, p2p_->cpu_per_rank_, [seen](uint32_t s) { return s != seen; }, [&] {
        try {
          p2p_->segment_->throw_if_peers_lost(start, limit, next_check);
        } catch (const c10::DistBackendError& e) {
          raise_collective_failure(message_->call, message_of(e));
        }
      });
    }
    if (!message_->failure.empty()) raise_collective_failure(message_->call, message_->failure);
    return true;
  }

 private:
  std::shared_ptr<SharedMemoryPointToPoint> p2p_;
  std::shared_ptr<SharedMemoryPointToPoint::Message> message_;
};

std::shared_ptr<SharedMemoryPointToPoint> SharedMemoryPointToPoint::connect(c10d::Store& store, int rank, int size,
                                                                            std::chrono::milliseconds timeout) {
  auto segment = SharedSegment::connect(store, "p2p", rank, size,
                                        static_cast<size_t>(size) * size * kSlots * slot_bytes());
  if (!segment) return nullptr;
  return std::shared_ptr<SharedMemoryPointToPoint>(
      new SharedMemoryPointToPoint(std::move(segment), rank, size, timeout));
}

SharedMemoryPointToPoint::SharedMemoryPointToPoint(std::unique_ptr<SharedSegment> segment, int rank, int size,
                                                   std::chrono::milliseconds timeout)
    : segment_(std::move(segment)),
      rank_(rank),
      size_(size),
      timeout_(timeout),
      cpu_per_rank_(has_cpu_per_rank(size)),
      sent_(size),
      received_(size) {}

SharedMemoryPointToPoint::~SharedMemoryPointToPoint() {
  // Messages still waiting for their peer keep their memory (never freed): the peer may yet copy to or from it.
  for (auto& m : waiting_) new std::shared_ptr<Message>(m);  // NOLINT: deliberately never freed
}

c10::intrusive_ptr<c10d::Work> SharedMemoryPointToPoint::send(const at::Tensor& tensor, int dst, std::string call) {
  return post(tensor, dst, true, std::move(call));
}

c10::intrusive_ptr<c10d::Work> SharedMemoryPointToPoint::recv(const at::Tensor& tensor, int src, std::string call) {
  return post(tensor, src, false, std::move(call));
}

void SharedMemoryPointToPoint::progress() {
  // Finish first: releasing a slot may free the one a queued message waits for.
  waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(), [](auto& m) { return m->try_finish(); }),
                 waiting_.end());
  queued_.erase(std::remove_if(queued_.begin(), queued_.end(), [this](auto& m) { return try_post(m); }),
                queued_.end());
}

c10::intrusive_ptr<c10d::Work> SharedMemoryPointToPoint::post(const at::Tensor& tensor, int peer, bool sending,
                                                              std::string call) {
  TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_, "neuron backend: ", call, ": rank ", peer,
              " is not another rank of this group of ", size_);
  auto m = std::make_shared<Message>();
  m->sending = sending;
  m->peer = peer;
  m->rank = rank_;
  m->call = std::move(call);
  m->user = tensor;
  m->host = tensor.device().type() == kNeuron ? host_alias(tensor) : tensor;
  m->dense = m->host.is_contiguous() ? m->host
                                     : (sending ? m->host.contiguous() : at::empty(m->host.sizes(), m->host.options()));

  std::lock_guard<std::mutex> guard(mutex_);
  progress();
  const uint64_t n = sending ? sent_[peer]++ : received_[peer]++;
  const int src = sending ? rank_ : peer, dst = sending ? peer : rank_;
  m->slot = reinterpret_cast<Slot*>(segment_->data() +
                                    ((static_cast<size_t>(src) * size_ + dst) * kSlots + n % kSlots) * slot_bytes());
  m->use = use_of(n);
  // Messages of one pair meet by their number (slot and use), so one may be posted before an earlier one.
  if (!try_post(m)) queued_.push_back(m);
  return c10::make_intrusive<PointToPointWork>(shared_from_this(), m);
}

bool SharedMemoryPointToPoint::try_post(const std::shared_ptr<Message>& m) {
  Slot* slot = m->slot;
  auto state = state_of(slot);
  // The slot's previous message (kSlots ago) must be over on both sides first.
  if ((state.load(std::memory_order_acquire) >> 8) != m->use) return false;
  const bool sending = m->sending;
  slot->ends[sending ? 0 : 1] = end_of(m->dense, reinterpret_cast<uint64_t>(m->dense.data_ptr()));
  const uint32_t before = state.fetch_or(sending ? kSent : kReceived, std::memory_order_seq_cst);
  if (!(before & (sending ? kReceived : kSent))) {
    // First: the peer completes the message when it posts its end. Held here (not only by the work), so that a
    // work dropped unwaited keeps its memory until the peer is done, and its slot is released all the same.
    waiting_.push_back(m);
    wake(slot);
    return true;
  }
  // Second: compare the ends, move the bytes, mark the slot done for the side that came first.
  const End& other = slot->ends[sending ? 1 : 0];
  uint32_t outcome = kDone;
  if (!agree(slot->ends[0], slot->ends[1])) {
    outcome |= kRefused;
  } else if (int err = copy_with_peer(!sending, other.pid, m->dense.data_ptr(), other.address, m->dense.nbytes())) {
    slot->error = err;
    outcome |= kFailed;
  }
  // Concluded before the slot is marked: from then on the side that came first may release it at any time.
  m->conclude(outcome);
  state.fetch_or(outcome, std::memory_order_seq_cst);
  wake(slot);  // the side that came first releases the slot
  if ((outcome & kFailed) && !segment_->dead_peers().empty()) {
    m->failure = c10::str(segment_->dead_peers(), " exited (noticed in shared memory)");
  }
  return true;
}

} // namespace neuron::distributed
