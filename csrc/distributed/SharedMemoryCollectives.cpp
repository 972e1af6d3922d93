#include "distributed/SharedMemoryCollectives.h"

#include "distributed/RankOrderReduction.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include <cerrno>

#include <sys/uio.h>

namespace neuron::distributed {
namespace {

// The control block at the start of the segment; then, per rank, one int64 value (exchange()'s rounds),
// one address (what process_vm_readv reads take from the rank's memory) and one location in the
// rank's device memory that the peers map (locate_all); then the buffers.
struct Control {
  alignas(64) uint32_t arrived;  // futex word: barrier arrivals so far, all barriers together (wraps)
  alignas(64) uint32_t sleepers; // ranks asleep on `arrived`: the last arrival wakes them only if any
};
constexpr size_t kValuesOffset = 256;
static_assert(sizeof(Control) <= kValuesOffset);
size_t addresses_offset(int size) { return kValuesOffset + sizeof(int64_t) * size; }
size_t locations_offset(int size) { return addresses_offset(size) + sizeof(uint64_t) * size; }
size_t control_bytes(int size) {
  return (locations_offset(size) + sizeof(uint64_t) * size + 4095) / 4096 * 4096;
}

// From this size on, collectives on tensors in the peers' mapped device memory (PeerMemory) read them
// there: all_reduce reduces chunk r of every rank's tensor straight into rank r's (a reduce-scatter),
// meets, copies the others' reduced chunks out of their tensors (an all-gather) and meets again: three
// meetings and one copy, against two meetings per slot and three copies through the slots.
constexpr int64_t kPeerMemoryMinBytes = 256 << 10;

// Reductions of more than two ranks accumulate block by block, so that the partial result stays in the
// cache between the steps of the rank order.
constexpr int64_t kReductionBlockBytes = 256 << 10;

// From this size per rank on, copies (all_gather, broadcast) read the peers' memory directly: one
// system call per peer instead of a copy in and a barrier per slot. Measured on a loaded 2-CPU host
// (ranks alternating both ways): 1.7x faster at 32 MiB per rank, 0.9x at 2 MiB. Reductions stay on
// the slots: reading the peers' pieces into scratch memory first was measured 1.3-1.9x slower there.
constexpr int64_t kDirectMinSlots = 4;

// A slot per rank and buffer. Large enough that the per-piece barriers are a small share of a large
// collective, small enough that a piece moves through the shared cache (slots of all ranks of a
// piece stay in the L3 between the copy in and the reads), not main memory.
constexpr size_t kDefaultSlotBytes = 1 << 20;

// Up to this size an all_reduce is latency: every rank reduces all of it after a single barrier
// (size x the reads, a few microseconds at most), instead of reduce-scatter, barrier, all-gather.
constexpr size_t kWholeReductionBytes = 64 << 10;

size_t slot_bytes_from_env() {
  const char* v = std::getenv("TORCHNEURON_SHM_SLOT_KIB");  // tuning only (bench): slot size in KiB
  size_t kib = v && *v ? std::strtoull(v, nullptr, 10) : 0;
  return kib ? kib << 10 : kDefaultSlotBytes;
}

// [begin, end) of chunk c when `count` elements are cut into n chunks.
inline int64_t chunk_begin(int64_t count, int n, int c) { return count * c / n; }

// What locate_all() publishes for a rank whose data the peers cannot read in its device memory
// (PeerMemory::locate's "not there"): a rank that has nothing to offer, or whose tensor lies outside.
constexpr uint64_t kNotInPeerMemory = 0;

// Whether every rank's data lies in its device memory that the peers map (locate_all).
bool all_located(const std::vector<uint64_t>& where) {
  return std::all_of(where.begin(), where.end(), [](uint64_t w) { return w != kNotInPeerMemory; });
}

// Calls read(q) for every other rank q, starting with the next one (rank + 1, ..., rank - 1): ranks
// that all read from peers do not all start on rank 0's memory at once.
template <typename F>
void for_each_peer_after(int rank, int size, F&& read) {
  for (int k = 1; k < size; ++k) read((rank + k) % size);
}

} // namespace

bool SharedMemoryCollectives::enabled() {
  const char* v = std::getenv("TORCHNEURON_SHM_COLLECTIVES");
  return !(v && std::string(v) == "0");
}

std::unique_ptr<SharedMemoryCollectives> SharedMemoryCollectives::connect(c10d::Store& store, int rank, int size,
                                                                          std::chrono::milliseconds timeout) {
  const size_t slot = slot_bytes_from_env();
  auto segment = SharedSegment::connect(store, "data", rank, size, control_bytes(size) + 2 * size * slot);
  if (!segment) return nullptr;
  std::unique_ptr<SharedMemoryCollectives> shm(new SharedMemoryCollectives(std::move(segment), rank, size, slot, timeout));
  shm->direct_ = shm->peers_readable(store);
  // TORCHNEURON_SHM_DIRECT=0: through the slots only (tests of that path; the same on every rank).
  if (shm->direct_) shm->peers_ = PeerMemory::connect(store, rank, size);
  return shm;
}

// Whether this rank can read every peer's memory (process_vm_readv: same user, and no policy such
// as Yama's ptrace_scope forbids it), agreed through the store: true on every rank or on none.
bool SharedMemoryCollectives::peers_readable(c10d::Store& store) {
  static const uint64_t probe = 0x4e45555244495231;  // read by the peers
  published(rank_) = reinterpret_cast<uint64_t>(&probe);
  wait_barrier();
  const char* env = std::getenv("TORCHNEURON_SHM_DIRECT");  // "0": staging only (tests of that path, bench)
  bool all = !(env && std::string(env) == "0");
  for (int q = 0; q < size_ && all; ++q) {
    uint64_t seen = 0;
    iovec local{&seen, sizeof(seen)}, remote{reinterpret_cast<void*>(published(q)), sizeof(seen)};
    all = q == rank_ || (process_vm_readv(static_cast<pid_t>(segment_->pid(q)), &local, 1, &remote, 1, 0) ==
                             static_cast<ssize_t>(sizeof(seen)) && seen == probe);
  }
  const std::string prefix = "neuron_shm/direct/";
  store.set(prefix + std::to_string(rank_), all ? "1" : "0");
  std::vector<std::string> keys;
  for (int q = 0; q < size_; ++q) keys.push_back(prefix + std::to_string(q));
  store.wait(keys);
  for (const auto& k : keys) all = all && store.get_to_str(k) == "1";
  wait_barrier();  // every rank read the probe before any publishes a collective's addresses
  return all;
}

SharedMemoryCollectives::SharedMemoryCollectives(std::unique_ptr<SharedSegment> segment, int rank, int size,
                                                 size_t slot_bytes, std::chrono::milliseconds timeout)
    : segment_(std::move(segment)),
      rank_(rank),
      size_(size),
      slot_bytes_(slot_bytes),
      timeout_(timeout),
      spin_(has_cpu_per_rank(size)) {}

char* SharedMemoryCollectives::slot(int buffer, int rank) const {
  return segment_->data() + control_bytes(size_) + (static_cast<size_t>(buffer) * size_ + rank) * slot_bytes_;
}

uint64_t& SharedMemoryCollectives::published(int rank) const {
  return reinterpret_cast<uint64_t*>(segment_->data() + addresses_offset(size_))[rank];
}

std::vector<uint64_t> SharedMemoryCollectives::locate_all(uint64_t mine) {
  auto* locations = reinterpret_cast<uint64_t*>(segment_->data() + locations_offset(size_));
  std::atomic_ref<uint64_t>(locations[rank_]).store(mine, std::memory_order_release);
  // Every rank reads all locations before its next barrier: no rank publishes again before that.
  wait_barrier();
  std::vector<uint64_t> all(size_);
  for (int q = 0; q < size_; ++q) all[q] = std::atomic_ref<uint64_t>(locations[q]).load(std::memory_order_acquire);
  return all;
}

void SharedMemoryCollectives::reduce_into(char* dst, const std::vector<const char*>& srcs, int64_t count,
                                          at::ScalarType dtype, c10d::ReduceOp::RedOpType op) {
  const int64_t e = static_cast<int64_t>(at::elementSize(dtype));
  // Two ranks: one pass, in place (dst is one of the two sources, element by element).
  const int64_t block = size_ <= 2 ? std::max<int64_t>(count, 1) : std::max<int64_t>(kReductionBlockBytes / e, 1);
  std::vector<const void*> at_block(size_);
  for (int64_t off = 0; off < count; off += block) {
    const int64_t len = std::min(block, count - off);
    for (int q = 0; q < size_; ++q) at_block[q] = srcs[q] + off * e;
    reduce_in_rank_order(dst + off * e, at_block.data(), size_, len, dtype, op);
  }
}

void SharedMemoryCollectives::read_peer(int q, void* to, uint64_t from, int64_t bytes) {
  auto* dst = static_cast<char*>(to);
  while (bytes > 0) {
    iovec local{dst, static_cast<size_t>(bytes)}, remote{reinterpret_cast<void*>(from), static_cast<size_t>(bytes)};
    const ssize_t n = process_vm_readv(static_cast<pid_t>(segment_->pid(q)), &local, 1, &remote, 1, 0);
    if (n <= 0) {
      const int err = errno;
      if (auto dead = segment_->dead_peers(); !dead.empty()) {
        C10_THROW_ERROR(DistBackendError, c10::str(dead, " exited (noticed in shared memory)"));
      }
      C10_THROW_ERROR(DistBackendError, c10::str("reading ", bytes, " bytes of rank ", q, "'s memory (pid ",
                                                 segment_->pid(q), ") failed: ", std::strerror(err)));
    }
    dst += n;
    from += static_cast<uint64_t>(n);
    bytes -= n;
  }
}

void SharedMemoryCollectives::check_usable() const {
  if (!broken_.empty()) {
    C10_THROW_ERROR(DistBackendError,
                    c10::str("an earlier collective of this group failed (", broken_,
                             "); the group cannot be used any more: destroy it (or restart the job)"));
  }
}

template <typename F>
void SharedMemoryCollectives::guarded(F&& body) {
  std::lock_guard<std::mutex> guard(mutex_);
  check_usable();
  try {
    body();
  } catch (const c10::DistBackendError& e) {
    broken_ = e.what_without_backtrace();
    throw;
  }
}

void SharedMemoryCollectives::wait_barrier() {
  auto* control = reinterpret_cast<Control*>(segment_->data());
  const uint32_t target = static_cast<uint32_t>(size_) * ++barriers_;
  if (SharedSegment::arrive(&control->arrived, &control->sleepers, target)) return;
  segment_->wait_arrivals(&control->arrived, &control->sleepers, target, spin_, timeout_);
}

void SharedMemoryCollectives::barrier() {
  guarded([&] { wait_barrier(); });
}

void SharedMemoryCollectives::all_reduce(void* data, int64_t count, at::ScalarType dtype,
                                         c10d::ReduceOp::RedOpType op, int root) {
  guarded([&] {
    const size_t e = at::elementSize(dtype);
    char* mine = static_cast<char*>(data);
    std::vector<const void*> srcs(size_);
    if (count * static_cast<int64_t>(e) <= static_cast<int64_t>(std::min(kWholeReductionBytes, slot_bytes_))) {
      // Small: one barrier instead of two. Every rank publishes all its data; every rank (or only the
      // root) reduces the whole of it, in the same rank order: the same bits as by chunks.
      const int b = next_buffer();
      std::memcpy(slot(b, rank_), mine, count * e);
      wait_barrier();
      if (root < 0 || root == rank_) {
        for (int q = 0; q < size_; ++q) srcs[q] = slot(b, q);
        reduce_in_rank_order(mine, srcs.data(), size_, count, dtype, op);
      }
      return;
    }
    const int64_t bytes = count * static_cast<int64_t>(e);
    if (peers_ && root < 0 && bytes > static_cast<int64_t>(slot_bytes_)) {
      const auto where = locate_all(peers_->locate(mine, bytes));
      if (all_located(where)) {
        // Every rank's tensor is readable by all: rank r reduces chunk r of every tensor, in rank order,
        // into its own (in place: only rank r reads or writes chunk r in this phase); all meet; every rank
        // copies the other reduced chunks from their owners' tensors; all meet again (nobody changes its
        // tensor before the peers read their chunk of it).
        auto begin = [&](int c) { return chunk_begin(count, size_, c); };
        const int64_t b0 = begin(rank_);
        std::vector<const char*> from(size_);
        for (int q = 0; q < size_; ++q) from[q] = (q == rank_ ? mine : peers_->at(q, where[q])) + b0 * e;
        reduce_into(mine + b0 * e, from, begin(rank_ + 1) - b0, dtype, op);
        wait_barrier();
        for_each_peer_after(rank_, size_, [&](int c) {
          std::memcpy(mine + begin(c) * e, peers_->at(c, where[c]) + begin(c) * e, (begin(c + 1) - begin(c)) * e);
        });
        wait_barrier();
        return;
      }
    }
    // One piece (up to a slot): a rank whose tensor the peers can read in place (PeerMemory) publishes
    // where it is instead of copying it in; the others read it there. Still two meetings: the tensors
    // are read only before the second, and the reduced chunks go out through the slots.
    auto* locations = reinterpret_cast<uint64_t*>(segment_->data() + locations_offset(size_));
    const bool one_piece = peers_ && bytes <= static_cast<int64_t>(slot_bytes_);
    const int64_t piece = static_cast<int64_t>(slot_bytes_ / e);
    for (int64_t off = 0; off < count; off += piece) {
      const int64_t len = std::min(piece, count - off);
      const int b = next_buffer();
      char* own = slot(b, rank_);
      char* local = mine + off * e;
      auto begin = [&](int c) { return chunk_begin(len, size_, c); };
      const uint64_t in_place = one_piece ? peers_->locate(mine, bytes) : 0;
      if (one_piece) std::atomic_ref<uint64_t>(locations[rank_]).store(in_place, std::memory_order_release);
      // The chunks the others reduce; chunk rank_ stays here and is reduced in place.
      for (int c = 0; c < size_ && !in_place; ++c) {
        if (c != rank_) std::memcpy(own + begin(c) * e, local + begin(c) * e, (begin(c + 1) - begin(c)) * e);
      }
      wait_barrier();
      const int64_t b0 = begin(rank_), n0 = begin(rank_ + 1) - b0;
      for (int q = 0; q < size_; ++q) {
        const uint64_t at = one_piece && q != rank_ ? std::atomic_ref<uint64_t>(locations[q]).load(std::memory_order_acquire) : 0;
        srcs[q] = q == rank_ ? local + b0 * e : at ? peers_->at(q, at) + b0 * e : slot(b, q) + b0 * e;
      }
      // Into this rank's slot (the others copy it out from there), then here.
      reduce_in_rank_order(own + b0 * e, srcs.data(), size_, n0, dtype, op);
      if (root < 0 || root == rank_) std::memcpy(local + b0 * e, own + b0 * e, n0 * e);
      wait_barrier();
      if (root < 0 || root == rank_) {
        for (int c = 0; c < size_; ++c) {
          if (c != rank_) std::memcpy(local + begin(c) * e, slot(b, c) + begin(c) * e, (begin(c + 1) - begin(c)) * e);
        }
      }
    }
  });
}

void SharedMemoryCollectives::reduce_scatter(void* out, const std::vector<const void*>& chunks, int64_t count,
                                             at::ScalarType dtype, c10d::ReduceOp::RedOpType op) {
  TORCH_INTERNAL_ASSERT(static_cast<int>(chunks.size()) == size_);
  guarded([&] {
    const size_t e = at::elementSize(dtype);
    // A slot holds one sub-slot per rank: this rank's piece of the chunk each other rank reduces.
    const size_t sub = slot_bytes_ / size_ / 64 * 64;
    const int64_t chunk_bytes = count * static_cast<int64_t>(e);
    if (peers_ && chunk_bytes * size_ >= kPeerMemoryMinBytes) {
      // Readable by the peers only as one tensor (the chunks one after the other) that the output
      // does not overlap (except as this rank's own chunk, which only this rank reads).
      const char* first = static_cast<const char*>(chunks[0]);
      bool one_tensor = true;
      for (int c = 0; c < size_; ++c) one_tensor = one_tensor && chunks[c] == first + c * chunk_bytes;
      const char* o = static_cast<const char*>(out);
      const bool overlaps = o < first + chunk_bytes * size_ && first < o + chunk_bytes && out != chunks[rank_];
      const auto where =
          locate_all(one_tensor && !overlaps ? peers_->locate(first, chunk_bytes * size_) : kNotInPeerMemory);
      if (all_located(where)) {
        // out = chunk r of every rank's input, reduced in rank order; all meet (nobody changes its
        // input before the peers read their chunks of it).
        std::vector<const char*> from(size_);
        for (int q = 0; q < size_; ++q) from[q] = (q == rank_ ? first : peers_->at(q, where[q])) + rank_ * chunk_bytes;
        reduce_into(static_cast<char*>(out), from, count, dtype, op);
        wait_barrier();
        return;
      }
    }

    const int64_t piece = static_cast<int64_t>(sub / e);
    std::vector<const void*> srcs(size_);
    for (int64_t off = 0; off < count; off += piece) {
      const int64_t len = std::min(piece, count - off);
      const int b = next_buffer();
      char* own = slot(b, rank_);
      for (int c = 0; c < size_; ++c) {
        if (c != rank_) std::memcpy(own + c * sub, static_cast<const char*>(chunks[c]) + off * e, len * e);
      }
      wait_barrier();
      for (int q = 0; q < size_; ++q) {
        srcs[q] = q == rank_ ? static_cast<const char*>(chunks[rank_]) + off * e : slot(b, q) + rank_ * sub;
      }
      reduce_in_rank_order(static_cast<char*>(out) + off * e, srcs.data(), size_, len, dtype, op);
    }
  });
}

void SharedMemoryCollectives::all_gather(const std::vector<void*>& outs, const void* in, int64_t bytes) {
  TORCH_INTERNAL_ASSERT(static_cast<int>(outs.size()) == size_);
  guarded([&] {
    const char* input = static_cast<const char*>(in);
    if (peers_ && bytes * size_ >= kPeerMemoryMinBytes) {
      if (outs[rank_] != in) std::memmove(outs[rank_], in, bytes);  // before meeting: no peer reads it
      const auto where = locate_all(peers_->locate(in, bytes));
      if (all_located(where)) {
        for_each_peer_after(rank_, size_, [&](int q) { std::memcpy(outs[q], peers_->at(q, where[q]), bytes); });
        wait_barrier();  // nobody changes its input before the peers read it
        return;
      }
    }
    if (direct_ && bytes >= kDirectMinSlots * static_cast<int64_t>(slot_bytes_)) {
      // Every rank reads the peers' inputs straight into its outputs: each byte moved once.
      published(rank_) = reinterpret_cast<uint64_t>(in);
      if (outs[rank_] != in) std::memmove(outs[rank_], in, bytes);  // while the others arrive
      wait_barrier();
      for_each_peer_after(rank_, size_, [&](int q) { read_peer(q, outs[q], published(q), bytes); });
      wait_barrier();
      return;
    }
    const int64_t piece = static_cast<int64_t>(slot_bytes_);
    for (int64_t off = 0; off < bytes; off += piece) {
      const int64_t len = std::min(piece, bytes - off);
      const int b = next_buffer();
      std::memcpy(slot(b, rank_), input + off, len);
      // Our own part while the others copy theirs in (nothing to do if the input is that part already).
      char* own_out = static_cast<char*>(outs[rank_]) + off;
      if (own_out != input + off) std::memmove(own_out, input + off, len);
      wait_barrier();
      for (int q = 0; q < size_; ++q) {
        if (q != rank_) std::memcpy(static_cast<char*>(outs[q]) + off, slot(b, q), len);
      }
    }
  });
}

void SharedMemoryCollectives::broadcast(void* data, int64_t bytes, int root) {
  guarded([&] {
    // The root's piece may fill the whole buffer (every rank's slot).
    const int64_t piece = static_cast<int64_t>(slot_bytes_ * size_);
    char* d = static_cast<char*>(data);
    if (peers_ && bytes >= kPeerMemoryMinBytes) {
      const auto where = locate_all(rank_ == root ? peers_->locate(data, bytes) : kNotInPeerMemory);
      if (where[root] != kNotInPeerMemory) {
        if (rank_ != root) std::memcpy(d, peers_->at(root, where[root]), bytes);
        wait_barrier();  // the root does not change its tensor before the others read it
        return;
      }
    }
    if (direct_ && bytes >= kDirectMinSlots * static_cast<int64_t>(slot_bytes_)) {
      if (rank_ == root) published(rank_) = reinterpret_cast<uint64_t>(data);
      wait_barrier();
      if (rank_ != root) read_peer(root, data, published(root), bytes);
      wait_barrier();
      return;
    }
    for (int64_t off = 0; off < bytes; off += piece) {
      const int64_t len = std::min(piece, bytes - off);
      const int b = next_buffer();
      if (rank_ == root) std::memcpy(slot(b, 0), d + off, len);
      wait_barrier();
      if (rank_ != root) std::memcpy(d + off, slot(b, 0), len);
    }
  });
}

void SharedMemoryCollectives::exchange(const std::vector<const void*>& send, const std::vector<int64_t>& send_bytes,
                                       const std::vector<void*>& recv, const std::vector<int64_t>& recv_bytes) {
  TORCH_INTERNAL_ASSERT(static_cast<int>(send.size()) == size_ && static_cast<int>(recv.size()) == size_);
  guarded([&] {
    const int64_t sub = static_cast<int64_t>(slot_bytes_ / size_ / 64 * 64);
    // The rounds: enough for the largest block any rank sends, agreed through the segment.
    int64_t largest = 0;
    for (int q = 0; q < size_; ++q) largest = std::max(largest, q == rank_ ? 0 : send_bytes[q]);
    auto* values = reinterpret_cast<int64_t*>(segment_->data() + kValuesOffset);  // one per rank
    std::atomic_ref<int64_t>(values[rank_]).store(largest, std::memory_order_release);
    // Our own block needs nothing from the others.
    const int64_t own = std::min(send_bytes[rank_], recv_bytes[rank_]);
    if (own > 0 && recv[rank_] != send[rank_]) std::memmove(recv[rank_], send[rank_], own);
    wait_barrier();
    for (int q = 0; q < size_; ++q) largest = std::max(largest, std::atomic_ref<int64_t>(values[q]).load());
    // At least one round, with its barrier: no rank may publish its next exchange's value before
    // every rank has read this one.
    const int64_t rounds = std::max<int64_t>(1, (largest + sub - 1) / sub);
    for (int64_t k = 0; k < rounds; ++k) {
      const int64_t off = k * sub;
      const int b = next_buffer();
      char* own = slot(b, rank_);
      for (int q = 0; q < size_; ++q) {
        if (q == rank_ || send_bytes[q] <= off) continue;
        std::memcpy(own + q * sub, static_cast<const char*>(send[q]) + off, std::min(sub, send_bytes[q] - off));
      }
      wait_barrier();
      for (int q = 0; q < size_; ++q) {
        if (q == rank_ || recv_bytes[q] <= off) continue;
        std::memcpy(static_cast<char*>(recv[q]) + off, slot(b, q) + rank_ * sub, std::min(sub, recv_bytes[q] - off));
      }
    }
  });
}

} // namespace neuron::distributed
