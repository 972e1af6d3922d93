#include "distributed/PeerMemory.h"

#include "runtime/Runtime.h"

#include <c10/util/StringUtil.h>

#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace neuron::distributed {

// A peer's arena, mapped read-only.
struct PeerMemory::Mapping {
  const char* base = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (base) munmap(const_cast<char*>(base), bytes);
  }
};

namespace {

// Process-wide: (pid, fd) -> the mapping, while some group uses it.
std::mutex g_mu;
std::map<std::pair<int64_t, int>, std::weak_ptr<PeerMemory::Mapping>> g_mappings;

std::shared_ptr<PeerMemory::Mapping> map_peer(int64_t pid, int fd, size_t bytes) {
  std::lock_guard<std::mutex> guard(g_mu);
  auto& cached = g_mappings[{pid, fd}];
  if (auto m = cached.lock(); m && m->bytes == bytes) return m;
  int opened = ::open(c10::str("/proc/", pid, "/fd/", fd).c_str(), O_RDONLY | O_CLOEXEC);
  if (opened < 0) return nullptr;
  struct stat st {};
  void* p = ::fstat(opened, &st) == 0 && static_cast<size_t>(st.st_size) == bytes
                ? ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED | MAP_NORESERVE, opened, 0)
                : MAP_FAILED;
  ::close(opened);
  if (p == MAP_FAILED) return nullptr;
  auto m = std::make_shared<PeerMemory::Mapping>();
  m->base = static_cast<const char*>(p);
  m->bytes = bytes;
  cached = m;
  return m;
}

} // namespace

std::unique_ptr<PeerMemory> PeerMemory::connect(c10d::Store& store, int rank, int size) {
  rt::share_device_memory();
  const rt::SharedMemory own = rt::shared_memory();
  const std::string prefix = "neuron_shm/peer_memory/";
  store.set(prefix + std::to_string(rank),
            own.fd < 0 ? std::string() : c10::str(::getpid(), " ", own.fd, " ", own.bytes));
  std::unique_ptr<PeerMemory> peers(new PeerMemory());
  peers->mappings_.resize(size);
  peers->bases_.assign(size, nullptr);
  bool ok = own.fd >= 0;
  for (int q = 0; q < size; ++q) {
    const std::string published = store.get_to_str(prefix + std::to_string(q));  // waits for it
    if (published.empty()) {
      ok = false;
      continue;
    }
    if (q == rank || !ok) continue;
    std::istringstream in(published);
    int64_t pid = 0;
    int fd = -1;
    size_t bytes = 0;
    in >> pid >> fd >> bytes;
    peers->mappings_[q] = map_peer(pid, fd, bytes);
    if (!peers->mappings_[q]) ok = false;
    else peers->bases_[q] = peers->mappings_[q]->base;
  }
  // Agreed: every rank mapped every peer, or none uses the arenas.
  store.set(prefix + "ok/" + std::to_string(rank), ok ? "1" : "0");
  for (int q = 0; q < size; ++q) ok = store.get_to_str(prefix + "ok/" + std::to_string(q)) == "1" && ok;
  if (!ok) return nullptr;
  peers->own_ = own.base;
  peers->own_bytes_ = own.bytes;
  peers->bases_[rank] = own.base;
  return peers;
}

uint64_t PeerMemory::locate(const void* p, int64_t bytes) const {
  const char* c = static_cast<const char*>(p);
  if (c < own_ || bytes < 0 || c + bytes > own_ + own_bytes_) return 0;
  return static_cast<uint64_t>(c - own_) + 1;
}

} // namespace neuron::distributed
