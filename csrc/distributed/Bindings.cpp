// Python bindings of the c10d backend: the module torch_neuronx._C_distributed.
//
// It lives in the same shared library as torch_neuronx._C but is a module of
// its own (a second PyInit symbol, loaded by torch_neuronx.distributed with
// importlib's ExtensionFileLoader, PEP 489), so that `import torch` does not
// pay for c10d types until a process group is created.
#include "distributed/ProcessGroupNeuron.h"

#include <pybind11/chrono.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <torch/extension.h>

namespace py = pybind11;
using neuron::distributed::ProcessGroupNeuron;

PYBIND11_MODULE(_C_distributed, m) {
  m.doc() = "TorchNeuron c10d backend (ProcessGroupNeuron)";
  // Our classes derive from c10d types that torch registers with pybind11.
  py::module_::import("torch._C._distributed_c10d");

  using Options = ProcessGroupNeuron::Options;
  py::class_<Options, c10d::Backend::Options, c10::intrusive_ptr<Options>>(m, "Options")
      .def(py::init<std::chrono::milliseconds>(), py::arg("timeout") = kBackendDefaultTimeout)
      .def_readwrite("timeout", &Options::timeout)
      .def_readwrite("group_name", &Options::group_name)
      .def_readwrite("global_ranks_in_group", &Options::global_ranks_in_group)
      // split_group deep-copies the parent's options before handing them to split().
      .def("__deepcopy__", [](const Options& self, py::dict) { return c10::make_intrusive<Options>(self); });

  // The works of the backend's collectives, as their Python type: torch's Work has no binding for the
  // sequence number, TorchNeuron's works have `get_sequence_number()` (the collective's place in its group).
  py::class_<neuron::distributed::NeuronWork, c10d::Work, c10::intrusive_ptr<neuron::distributed::NeuronWork>>(
      m, "NeuronWork")
      .def("get_sequence_number", &neuron::distributed::NeuronWork::getSequencenumber);
  py::class_<neuron::distributed::CompletedWork, c10d::Work, c10::intrusive_ptr<neuron::distributed::CompletedWork>>(
      m, "CompletedWork")
      .def("get_sequence_number", &neuron::distributed::CompletedWork::getSequencenumber);

  py::class_<ProcessGroupNeuron, c10d::Backend, c10::intrusive_ptr<ProcessGroupNeuron>>(m, "ProcessGroupNeuron")
      .def(py::init<c10::intrusive_ptr<c10d::Backend>, c10::intrusive_ptr<Options>, ProcessGroupNeuron::HostFactory,
                    const c10::intrusive_ptr<c10d::Store>&>(),
           py::arg("host"), py::arg("options"), py::arg("host_factory"), py::arg("store"),
           py::call_guard<py::gil_scoped_release>())  // meets the other ranks on the store
      // split_group reads `options` of the parent (as it does for gloo and NCCL).
      .def_property_readonly("options", &ProcessGroupNeuron::getBackendOptions)
      .def_property_readonly("host", &ProcessGroupNeuron::host,
                             "The host backend (ProcessGroupGloo): groups spanning hosts, send/recv")
      .def_property_readonly("check_transport", &ProcessGroupNeuron::check_transport,
                             "How the ranks compare collectives before running them: 'shared memory' (ranks of "
                             "one host), 'network' (through the host backend) or 'off'")
      .def_property_readonly("data_transport", &ProcessGroupNeuron::data_transport,
                             "What moves the data of the collectives: 'shared memory (peer device memory)', "
                             "'shared memory (direct reads)' or 'shared memory (staging)' (ranks of one host; "
                             "TORCHNEURON_SHM_COLLECTIVES=0 turns it off) or 'gloo'");
}
