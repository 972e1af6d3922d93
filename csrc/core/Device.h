// The neuron device type and the calling thread's current device.
#pragma once

#include <c10/core/Device.h>

namespace neuron {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

// Current device of the calling thread (torch.neuron.set_device), as in CUDA.
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);

} // namespace neuron
