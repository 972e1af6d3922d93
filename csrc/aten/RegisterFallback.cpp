// Registration of the boxed fallback (aten/native/Fallback.cpp): every ATen op
// without a dedicated neuron kernel runs its host kernel, zero-copy.
#include "aten/native/Fallback.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>

namespace neuron {

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

// Ops with a host (CPU) kernel and no neuron kernel of their own run that host kernel through the fallback.
// Without this, the dispatcher would pick a composite kernel for PrivateUse1 before the backend fallback
// (its order: a kernel for the key itself, then CompositeExplicitAutogradNonFunctional,
// CompositeExplicitAutograd, CompositeImplicitAutograd, and only then the fallback). Those composites are
// PyTorch's defaults for backends without a kernel, not what the host runs, and they differ from it:
// - structured ops (CompositeExplicitAutogradNonFunctional): empty + out= + a copy back for in-place ops,
//   three dispatches where the host kernel is one;
// - math_native_layer_norm over a normalized size of 1 returns ~1e-7..5e-6 where the host kernel returns 0;
//   math_group_norm views its input and fails on channels-last memory (an image converted from numpy) where
//   the host kernel works (CompositeExplicitAutograd);
// - silu_backward, mish_backward, native_channel_shuffle (CompositeImplicitAutograd next to a CPU kernel):
//   the math formula rounds differently from the host kernel.
// One rule, from the dispatcher's own tables, so every such op of this torch is covered: no list to keep.
// Ops the device must own (allocation, views, copies, resize, set_) have a neuron kernel and are left alone;
// ops without a CPU kernel decompose the same way on both devices. Registering a neuron kernel for a
// CompositeImplicitAutograd op also makes its autograd key skip the composite, exactly as the CPU kernel
// does for CPU, so autograd behaves as on CPU. Called once from Python, after every static registration of
// the core.
int64_t route_ops_with_host_kernels_to_fallback() {
  static std::unique_ptr<torch::Library> lib;
  if (lib) return 0;
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__,
                                         __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  int64_t routed = 0;
  for (const auto& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
        !op->hasKernelForDispatchKey(c10::DispatchKey::CPU))
      continue;
    bool composite_on_neuron =
        op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) ||
        op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
        op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
    if (!composite_on_neuron) continue;
    std::string qualified = name.name.substr(6);
    if (!name.overload_name.empty()) qualified += "." + name.overload_name;
    lib->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&fallback>());
    ++routed;
  }
  return routed;
}

} // namespace neuron
