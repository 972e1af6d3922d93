#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace neuron {
// The boxed fallback: runs any op on its host kernel over zero-copy aliases.
void fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);
// 0: allow float64 silently, 1: warn once, 2: raise (TORCHNEURON_FP64).
// Route structured ops straight to the fallback (see Fallback.cpp); returns how many.
int64_t route_structured_ops_to_fallback();
void set_fp64_mode(int mode);
int fp64_mode();
// How many times each op ran through the host fallback (get_fallback_ops()).
std::vector<std::pair<std::string, int64_t>> fallback_counts();
void reset_fallback_counts();
} // namespace neuron
