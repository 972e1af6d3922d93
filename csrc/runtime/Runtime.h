// The one seam between TorchNeuron and a NeuronCore runtime.
//
// Everything above this header (allocator, guard, hooks, fallback, copies,
// collectives) talks to the hardware only through these functions. The
// emulator (Emulator.cpp) implements them on host RAM; a real Neuron runtime
// would implement the same functions over libnrt and nothing else changes.
#pragma once

#include <cstddef>
#include <cstdint>
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
};

// Topology is decided by the Python runtime layer (instance type, visible
// cores); the core only needs the count, each core's budget and a label used
// in error messages ("neuron:1 (NeuronCore 5 of trn1.32xlarge)").
void configure(const std::vector<int64_t>& hbm_bytes, const std::vector<std::string>& labels);
bool configured();
// Record why the runtime could not start (bad environment); every device use reports it.
void set_unavailable(const std::string& reason);
int device_count();
// Raises the reason the runtime is unavailable, or the one invalid-device error (the index, how many
// cores are visible, how to make more visible).
void check_device(int device);
int64_t hbm_bytes(int device);
const std::string& label(int device);

// Device memory. `allocate` raises c10::OutOfMemoryError past the budget.
void* allocate(int device, size_t nbytes);
void release(void* ptr);
// Count memory that was produced on the host (a kernel's fresh output) as
// device memory without copying it; returns false when the core is full.
bool adopt(int device, void* ptr, size_t nbytes);
void unadopt(const void* ptr);
// Which core owns ptr (the start of an allocation), or -1.
int device_of(const void* ptr);

void copy(void* dst, const void* src, size_t nbytes);
void synchronize(int device);

CoreStats stats(int device);
void reset_peak(int device);
void reset_accumulated(int device);
// Throws the OutOfMemoryError message for a refused request.
[[noreturn]] void raise_oom(int device, size_t nbytes);

} // namespace neuron::rt
