// The boxed fallback: any ATen op without a dedicated neuron kernel runs its
// host (CPU) kernel over zero-copy aliases of the device memory.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "aten/native/NeuronDtypeRules.h"  // fp64_mode(), read by the host kernels

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace neuron {

void fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);

// Route ops that have a host kernel but would take a composite on neuron to the fallback
// (aten/RegisterFallback.cpp); returns how many.
int64_t route_ops_with_host_kernels_to_fallback();


// How many times each op ran through the host fallback (get_emulator_op_counts()).
std::vector<std::pair<std::string, int64_t>> fallback_counts();
void reset_fallback_counts();

} // namespace neuron
