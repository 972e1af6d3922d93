// Per-core RNG: a neuron-tagged Philox-style generator (seed, offset) whose numbers come from a CPU engine.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace neuron {

// The CPU generator that produces the numbers of a neuron generator's next use (host kernels take it):
// seeded from the generator's (seed, offset); the offset moves on by one.
at::Generator host_engine(const at::Generator& neuron_generator);
const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);

} // namespace neuron
