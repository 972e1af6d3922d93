"""torch.compile(backend="neuron"): static-shape compilation for the emulated NeuronCore.

Registration is cheap: nothing here imports Dynamo or Inductor. The backend and
the device interface are registered when torch._dynamo is first imported.
"""

from __future__ import annotations

from . import stats  # noqa: F401  (torch_neuronx.compile_stats, torch.neuron.get_dynamo_metrics)
from .errors import NeuronCompileError  # noqa: F401

_registered = False


def register() -> None:
    global _registered
    if _registered:
        return
    _registered = True
    from . import static_shapes
    from .import_hooks import when_imported
    static_shapes.install()
    when_imported("torch._dynamo", _register_with_dynamo)
    when_imported("torch._inductor.codegen.common", _register_with_inductor)


def _register_with_dynamo() -> None:
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend
    from . import attention, device_interface, rng
    from .backend import neuron_backend
    device_interface.register()
    attention.register()
    rng.register()
    if "neuron" not in _COMPILER_FNS:
        register_backend(neuron_backend, name="neuron")


def _register_with_inductor() -> None:
    from . import inductor_device
    inductor_device.register()
