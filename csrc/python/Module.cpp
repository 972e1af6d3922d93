// Python bindings of the C++ core: torch_neuronx._C.
#include "aten/native/Fallback.h"
#include "aten/native/NeuronDtypeRules.h"
#include "aten/native/OpSignatures.h"
#include "aten/native/OpTracking.h"
#include "core/Device.h"
#include "core/Generator.h"
#include "core/HostBridge.h"
#include "runtime/Runtime.h"

#include <torch/csrc/Exceptions.h>
#include <torch/extension.h>

namespace py = pybind11;

namespace neuron {
void bind_memory_history(py::module& m);  // MemoryHistory.cpp
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "TorchNeuron C++ core (allocator, guard, hooks, generator, fallback, copies)";
  m.def("_configure", &neuron::rt::configure, "Configure the emulated cores: HBM bytes, label, bank, attachment per device");
  m.def("_set_unavailable", &neuron::rt::set_unavailable);
  m.def("_set_core_registry", &neuron::rt::set_core_registry, "Lock files (per physical core) and holder header per device");
  m.def("_is_configured", &neuron::rt::configured);
  // The runtime's start at first device use (torch_neuronx.runtime.init): called with the GIL from any thread.
  m.def("_set_runtime_starter", [](py::object start) {
    auto* held = new py::object(std::move(start));  // leaked: it may be called until the process exits
    neuron::rt::set_starter([held] {
      py::gil_scoped_acquire gil;
      (*held)();
    });
  });
  m.def("_runtime_started", &neuron::rt::started);
  m.def("_device_count", &neuron::rt::device_count);
  m.def("_hbm_bytes", &neuron::rt::hbm_bytes);
  m.def("_check_device", &neuron::rt::check_device);
  m.def("_current_device", [] { return static_cast<int>(neuron::current_device()); });
  m.def("_set_device", [](int d) { neuron::set_current_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("_synchronize", [](int d) {
    py::gil_scoped_release no_gil;
    neuron::rt::synchronize(d);
  });
  m.def("_memory_stats", [](int d) {
    auto s = neuron::rt::stats(d);
    py::dict out;
    out["allocated_bytes"] = s.allocated;
    out["peak_allocated_bytes"] = s.peak_allocated;
    out["num_allocs"] = s.num_allocs;
    out["num_frees"] = s.num_frees;
    out["num_ooms"] = s.num_ooms;
    out["total_allocated_bytes"] = s.total_allocated;
    out["total_freed_bytes"] = s.total_freed;
    out["live_allocs"] = s.live_allocs;
    out["peak_live_allocs"] = s.peak_live_allocs;
    out["hbm_bytes"] = neuron::rt::hbm_bytes(d);
    out["bank_allocated_bytes"] = neuron::rt::bank_allocated(d);  // with a neighbour sharing the bank
    return out;
  });
  neuron::bind_memory_history(m);
  m.def("_reset_peak", &neuron::rt::reset_peak);
  m.def("_empty_cache", &neuron::rt::empty_cache);
  m.def("_cached_host_bytes", &neuron::rt::cached_host_bytes);
  m.def("_reset_accumulated", &neuron::rt::reset_accumulated);
  m.def("_device_of_ptr", [](uintptr_t p) { return neuron::rt::device_of(reinterpret_cast<const void*>(p)); });
  m.def("_set_fp64_mode", &neuron::set_fp64_mode);
  m.def("_set_int64_mode", &neuron::dtype_rules::set_int64_mode);
  m.def("_set_in_compiled_graph", &neuron::dtype_rules::set_in_compiled_graph);
  m.def("_set_stochastic_rounding", &neuron::dtype_rules::set_stochastic_rounding);
  m.def("_set_cpu_fallback_allowed", &neuron::op_tracking::set_cpu_fallback_allowed);
  m.def("_set_registered_ops", &neuron::op_tracking::set_registered_ops);
  m.def("_track_registered_composites", &neuron::op_tracking::track_registered_composites);
  m.def("_boxed_composite_recorders", &neuron::op_tracking::boxed_composite_recorders);
  m.def("_executed_ops", &neuron::op_tracking::executed_ops);
  m.def("_fallback_ops", &neuron::op_tracking::fallback_ops);
  m.def("_clear_op_tracking", &neuron::op_tracking::clear);
  m.def("_log_op", &neuron::op_tracking::log_op);
  m.def("_op_signature_counts", &neuron::op_signatures::counts);
  m.def("_op_calls", &neuron::op_signatures::calls);
  m.def("_reset_op_signatures", &neuron::op_signatures::reset);
  m.def("_end_op_signature_step", [] {
    torch::PyWarningHandler warnings;  // its warning reaches Python's warnings module
    neuron::op_signatures::end_step();
  });
  m.def("_end_op_signature_module_call", [] {
    torch::PyWarningHandler warnings;
    neuron::op_signatures::end_module_call();
  });
  m.def("_fallback_counts", &neuron::fallback_counts);
  m.def("_reset_fallback_counts", &neuron::reset_fallback_counts);
  m.def("_route_ops_with_host_kernels_to_fallback", &neuron::route_ops_with_host_kernels_to_fallback);
  m.def("_guards_host_access", &neuron::rt::guards_host_access);
  m.def("_begin_host_access_scope", &neuron::rt::begin_host_access_scope);
  m.def("_end_host_access_scope", &neuron::rt::end_host_access_scope);
  // Host access to device tensors for host code outside ATen (compiled graphs' kernels).
  py::class_<neuron::HostAccess>(m, "_HostAccess")
      .def(py::init<>())
      .def("open", [](neuron::HostAccess& a, const at::Tensor& t) { a.open(t); })
      .def("close", &neuron::HostAccess::close);
  // A CPU tensor over a device tensor's bytes, open for host access while it lives (NKI kernels: torch_neuronx/nki).
  m.def("_host_alias", [](const at::Tensor& t) { return neuron::host_alias(t); });
  m.def("_default_generator", [](int d) { return neuron::default_generator(static_cast<c10::DeviceIndex>(d)); });
}
