// Layouts Neuron does not support at all (sparse COO/CSR/CSC/BSR/BSC, quantized,
// nested, mkldnn): a clear NotImplementedError naming the layout, the op and the fix,
// instead of an internal failure ("Cannot access storage of SparseTensorImpl").
#pragma once

#include <c10/core/Layout.h>

#include <string>

namespace neuron {

[[noreturn]] void reject_layout(const std::string& op, c10::Layout layout);

} // namespace neuron
