"""What Inductor is told about the `neuron` device: compile neuron graphs with backend="neuron".

The neuron backend runs Inductor on graphs retargeted to the host
(host_graph.py), so Inductor itself never generates code for a "neuron"
device. A graph given to plain backend="inductor" with neuron tensors would
otherwise fail deep inside Inductor ("KeyError: 'neuron'"); registering the
device with a code generator that explains the situation turns that into an
actionable error.
"""

from __future__ import annotations

from .errors import NeuronCompileError

USE_NEURON_BACKEND = (
    "torch.compile(backend='inductor') cannot generate code for neuron tensors: Inductor's own code "
    "generators target cpu/cuda/xpu/mps devices. Compile with torch.compile(..., backend='neuron'), which "
    "runs Inductor's C++ code generation for the NeuronCore (Transformers and Accelerate pick it by default "
    "on Neuron).")


class _RaisesOnUse(type):
    def __getattr__(cls, name):  # Inductor inspects class attributes (supports_caching, create, ...) first
        raise NeuronCompileError(USE_NEURON_BACKEND)


class _UseNeuronBackend(metaclass=_RaisesOnUse):
    """Stands for both the kernel scheduling and the wrapper code generator of device "neuron"."""

    def __init__(self, *args, **kwargs):
        raise NeuronCompileError(USE_NEURON_BACKEND)


def register() -> None:
    from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides
    from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides
    register_backend_for_device("neuron", _UseNeuronBackend, _UseNeuronBackend)
    register_device_op_overrides("neuron", CpuDeviceOpOverrides())  # host memory: no streams to set up
