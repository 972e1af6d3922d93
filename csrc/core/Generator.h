// Per-core RNG: a neuron-tagged generator whose numbers come from a CPU engine.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace neuron {

// The CPU generator that actually produces the numbers of a neuron generator (host kernels take it).
at::Generator host_engine(const at::Generator& neuron_generator);
const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);

} // namespace neuron
