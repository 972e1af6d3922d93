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

// Structured ATen ops (those with a functional/in-place/out= family) have a
// CompositeExplicitAutogradNonFunctional kernel that serves any backend lacking
// its own: it allocates the result (or a proxy for in-place ops), calls the
// out= variant, and copies back into `self` for in-place ops. On neuron that
// would be empty + out= through the fallback + an extra copy; the fallback can
// run the host's functional or in-place kernel directly instead.
// Likewise the few ops whose CompositeExplicitAutograd kernel is only the default
// for backends without a kernel of their own while the host has one
// (native_group_norm, native_layer_norm, _stack, addr, all/any.dims_out): the
// composite can differ from the host kernel (math_group_norm views its input and
// fails on channels-last memory, e.g. an image converted from numpy, where CPU's
// kernel works); the host kernel keeps neuron equal to CPU. Called once from
// Python, after every static registration of the core.
int64_t route_structured_ops_to_fallback() {
  static std::unique_ptr<torch::Library> lib;
  if (lib) return 0;
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__,
                                         __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  int64_t routed = 0;
  for (const auto& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op ||
        !(op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) ||
          op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) ||
        op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
        !op->hasKernelForDispatchKey(c10::DispatchKey::CPU))
      continue;
    std::string qualified = name.name.substr(6);
    if (!name.overload_name.empty()) qualified += "." + name.overload_name;
    lib->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&fallback>());
    ++routed;
  }
  return routed;
}

} // namespace neuron
