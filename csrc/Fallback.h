#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace neuron {
// 0: allow float64 silently, 1: warn once, 2: raise (TORCHNEURON_FP64).
void set_fp64_mode(int mode);
// How many times each op ran through the host fallback (get_fallback_ops()).
std::vector<std::pair<std::string, int64_t>> fallback_counts();
void reset_fallback_counts();
} // namespace neuron
