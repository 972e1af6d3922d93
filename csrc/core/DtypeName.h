// A dtype's Python name ("float32", as in torch.float32), for messages that speak Python to the user.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

namespace neuron {

inline std::string python_dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: return c10::toString(t);
  }
}

} // namespace neuron
