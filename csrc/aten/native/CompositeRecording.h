// The recording kernels in front of the composite ops TorchNeuron registers as one Neuron kernel
// (track_registered_composites, OpTracking.h): what they share between the unboxed kernels compiled per op
// (UnboxedComposites.cpp) and the boxed one that serves any other overload (OpTracking.cpp).
#pragma once

#include "aten/native/OpTracking.h"

#include <c10/core/DispatchKey.h>
#include <torch/library.h>

#include <string>

namespace neuron::op_tracking {

// One such op, made at registration and never destroyed.
struct Composite {
  Site site;
  c10::DispatchKey kernel;  // the alias key of the composite kernel it runs
  bool records_parts;       // a Python function there: the ops it calls are recorded too
  Composite(const std::string& name, c10::DispatchKey k, bool parts) : site(name), kernel(k), records_parts(parts) {}
};

// An overload's unboxed recording kernel: it calls the composite kernel of alias key `kernel` directly (a C++
// call, no argument stack) and reads its op's Composite from *state, which registration sets.
struct UnboxedComposite {
  c10::DispatchKey kernel;
  Composite** state;
  torch::CppFunction (*make)();
};

// The unboxed recording kernel of this overload ("aten::mul.Scalar"), or nullptr if this build has none.
const UnboxedComposite* find_unboxed_composite(const std::string& overload);

} // namespace neuron::op_tracking
