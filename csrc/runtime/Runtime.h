// The one seam between TorchNeuron and a NeuronCore runtime.
//
// Everything above this header (allocator, guard, hooks, fallback, copies,
// collectives, compiled graphs) talks to the hardware only through these
// functions, and reads or writes device memory from the host only through the
// host bridge (core/HostBridge.h), which opens it here. The emulator
// (Emulator.cpp) implements them on host RAM; a real Neuron runtime would
// implement the same functions over libnrt and nothing else changes.
// TORCHNEURON_STRICT_MEMORY=1 makes the emulator prove it: device memory is
// inaccessible (PROT_NONE) unless the bridge has it open, so a host access
// that bypasses the bridge faults (docs/runtime.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace neuron::rt {

struct CoreStats {
  int64_t allocated = 0;        // bytes currently held by live tensors
  int64_t peak_allocated = 0;   // high-water mark since the last reset
  int64_t num_allocs = 0;       // successful allocations
  int64_t num_frees = 0;
  int64_t num_ooms = 0;         // allocations refused for exceeding the HBM budget
  int64_t total_allocated = 0;  // bytes ever allocated / freed (cumulative, like CUDA's stats)
  int64_t total_freed = 0;
  int64_t live_allocs = 0;       // allocations currently held (not reset with the accumulated counts)
  int64_t peak_live_allocs = 0;  // high-water mark of live_allocs since the last reset_peak
};

// Topology is decided by the Python runtime layer (instance type, visible
// cores); the core needs, per device index: the HBM its bank offers, a label
// used in error messages ("neuron:1 (NeuronCore 5 of trn2.48xlarge)"), its
// HBM bank (devices with the same bank share one budget: the two cores of a
// pair at LNC=1 on Trainium2/3) and whether this process holds it (under a
// launcher a rank holds only its own core; `detached_reason` says why the
// others cannot be used and what to do). Threads that never chose a device
// start on `default_device` (the rank's own core).
void configure(const std::vector<int64_t>& hbm_bytes, const std::vector<std::string>& labels,
               const std::vector<int64_t>& banks, const std::vector<bool>& attached,
               const std::string& detached_reason, int default_device);
bool configured();
// The runtime starts at first device use, not when the plugin loads, as the Neuron runtime does
// (TorchNeuron's _lazy_init): a launcher that sets NEURON_RT_VISIBLE_CORES / LOCAL_RANK after `import
// torch` (mp.spawn workers, PyTorch's MultiProcessTestCase) is obeyed. `start` runs once, on the first
// call that needs the cores (device_count, a device check, the default device, an allocation); it
// calls configure() (or set_unavailable()). started(): whether it ran.
void set_starter(std::function<void()> start);
bool started();
// Exclusive core ownership across the processes of a host (torch_neuronx/runtime/ownership.py):
// `lock_files[d]` are the per-physical-core lock files of device d, in a registry directory the
// Python layer checked. On its first allocation a device takes a kernel-released lock (flock) on
// each, held until the process exits (crash and SIGKILL included), and records the process and
// its bytes in use there; a core another process holds raises an error naming it and its holder.
// `header[d]` is the text recorded for device d (pid, core, LNC, instance).
void set_core_registry(const std::vector<std::vector<std::string>>& lock_files,
                       const std::vector<std::string>& header);
// Record why the runtime could not start (bad environment); every device use reports it.
void set_unavailable(const std::string& reason);
int device_count();
// Raises the reason the runtime is unavailable, or the one invalid-device error (the index, how many
// cores are visible, how to make more visible): a RuntimeError, as TorchNeuron's and CUDA's device checks.
// 64-bit, so that an index past int's range is named in that error too.
void check_device(int64_t device);
// The device a thread uses before it sets one.
int default_device();
// Raises unless this process holds the device (a valid index of another rank's core does not count).
void check_attached(int device);
int64_t hbm_bytes(int device);
// Bytes in use on the device's HBM bank (its own and, on a shared bank, its neighbour's).
int64_t bank_allocated(int device);
const std::string& label(int device);

// Device memory. `allocate` raises c10::OutOfMemoryError past the budget.
// An allocation is named by the pointer `allocate` returned; offsets address bytes inside it.
void* allocate(int device, size_t nbytes);
void release(void* ptr);
// Returns what the runtime keeps of released memory for reuse to the host (torch.neuron.empty_cache()).
// The emulator keeps freed host blocks (HostBlockCache.h), counted on no core; cached_host_bytes() says
// how much. A runtime without such a cache: a no-op and 0.
void empty_cache();
size_t cached_host_bytes();
// Whether memory produced on the host (a kernel's fresh output) can be counted
// as device memory without a copy (adopt). The emulator: yes, except in strict
// mode; a real runtime: no (the bridge then allocates and copies host-to-device).
bool adopts_host_memory();
// Count host memory as device memory of `device`; false when the core is full.
bool adopt(int device, void* ptr, size_t nbytes);
void unadopt(const void* ptr);
// Which core owns ptr (the start of an allocation), or -1.
int device_of(const void* ptr);

// Copies name their direction, as a real runtime's DMA does (libnrt's
// nrt_tensor_write / nrt_tensor_read / nrt_tensor_copy).
void copy_host_to_device(void* device, size_t offset, const void* host, size_t nbytes);
void copy_device_to_host(void* host, const void* device, size_t offset, size_t nbytes);
void copy_device_to_device(void* dst, size_t dst_offset, const void* src, size_t src_offset, size_t nbytes);

// Host access to an allocation, for the host bridge only (core/HostBridge.h):
// open returns host memory holding the allocation's bytes until the matching
// close; opens nest (counted per allocation). The emulator returns the
// allocation itself (zero-copy); in strict mode it is readable and writable
// only while open. A runtime whose memory the host cannot address would stage:
// copy device-to-host on open and back on the last close.
void* open_host_access(void* allocation);
void close_host_access(void* allocation);
// False when open/close are no-ops (the emulator outside strict mode): callers may skip them.
bool guards_host_access();
// A host-access scope on the calling thread: allocations made on this thread while it is open stay
// open for host access until it ends (host code that allocates device memory as it goes and hands it
// to kernels by pointer: compiled graphs). Scopes nest.
void begin_host_access_scope();
void end_host_access_scope();

// Every change of device memory (allocation or adoption, release, refused request) is told to one
// observer, installed once by the core (profiler memory events, memory history). It is called on the
// thread that caused the change, outside the runtime's lock, with the core's allocated bytes after it.
enum class MemoryEvent { Alloc, Free, Oom };
using MemoryObserver = void (*)(MemoryEvent event, int device, const void* ptr, size_t nbytes, int64_t allocated);
void set_memory_observer(MemoryObserver observer);

// The allocations alive now (for memory snapshots).
struct LiveBlock {
  const void* ptr;
  int device;
  size_t nbytes;
};
std::vector<LiveBlock> live_blocks();

// Device memory the other processes of the host can read directly, as the cores of an instance read
// each other's HBM over NeuronLink (collectives between the ranks of a host: distributed/PeerMemory.h).
// After share_device_memory() (a process group whose ranks share the host calls it), the emulator
// places allocations of kSharedMinBytes and more in one shared-memory arena, a memfd that the peers map
// through /proc/<pid>/fd/<fd>; shared_memory() describes it (fd -1: none; strict mode never shares).
// Device memory at host address p, n bytes, is readable by the peers at offset p - base when it lies in
// [base, base + bytes). A real runtime would give NeuronLink addresses instead.
struct SharedMemory {
  int fd = -1;
  const char* base = nullptr;
  size_t bytes = 0;
};
constexpr size_t kSharedMinBytes = size_t(64) << 10;
void share_device_memory();
SharedMemory shared_memory();

void synchronize(int device);

CoreStats stats(int device);
void reset_peak(int device);
void reset_accumulated(int device);
// Throws the OutOfMemoryError message for a refused request.
[[noreturn]] void raise_oom(int device, size_t nbytes);

} // namespace neuron::rt
