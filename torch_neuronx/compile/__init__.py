"""torch.compile(backend="neuron"): static-shape compilation for the emulated NeuronCore.

The pipeline, in the order a graph goes through it:

  backend.py        the Dynamo backend "neuron" (a `torch_dynamo_backends` entry point in pyproject.toml)
  static_shapes.py  Neuron's rules for it: Dynamo's settings for neuron-compiled calls, dynamic=True rejected
  compiler.py       Inductor's inner compiler: each forward/backward/inference graph, through the stages below
  host_graph.py     graph: the ATen graph retargeted to the host, for Inductor's C++ code generation
  neff_cache.py     cache: the persistent compile cache (cache_trust.py: which entries may be loaded)
  launch.py         launch: the compiled graph run on device memory
  stats.py          compile_stats(): graphs, recompiles (with padding advice), graph breaks, cache hits

Registrations with Dynamo and Inductor for the device: device_interface.py (streams, current device),
attention.py (SDPA's kernel choice while tracing), inductor_device.py (plain backend="inductor" on neuron
tensors). Workarounds for torch and Transformers live in torch_neuronx/integrations/.

Registration is cheap: nothing here imports Dynamo or Inductor. Dynamo loads the backend
from its entry point on first use; the device's registrations run when torch._dynamo is
first imported (import_hooks.py).
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
    from .import_hooks import when_imported
    when_imported("torch._dynamo", _register_with_dynamo)
    when_imported("torch._inductor.codegen.common", _register_with_inductor)


def _register_with_dynamo() -> None:
    from ..integrations import checkpoint_rng_replay, torch_compile_backend_context
    from . import attention, device_interface
    device_interface.register()
    attention.register()
    checkpoint_rng_replay.install()
    # Before torch.compile creates its first backend wrapper (it imports Dynamo first): the backend's
    # context (static_shapes.py) reaches torch.compile(backend="neuron") only through this shim.
    torch_compile_backend_context.install()
    _register_backend_if_not_installed()
    # The "shapes keep changing" rule counts eager module calls with global module hooks; a compile must not
    # trace them (ops_report._TopLevelModuleCalls.compile_started says why).
    import torch._dynamo
    from ..ops_report import _module_calls
    torch._dynamo.callback_handler.register_start_callback(_module_calls.compile_started)


def _register_backend_if_not_installed() -> None:
    """For an install made before the backend's entry point existed: register it here, and say how to fix it.

    pip writes entry points when it installs the package; an editable install made before pyproject.toml
    declared `torch_dynamo_backends` has none, and backend="neuron" would not be found. Remove once every
    install is newer (2026-12).
    """
    from importlib.metadata import entry_points
    if any(ep.name == "neuron" for ep in entry_points(group="torch_dynamo_backends")):
        return
    import warnings
    from torch._dynamo.backends.registry import register_backend
    from .backend import neuron_backend
    warnings.warn("torch_neuronx: this install has no `torch_dynamo_backends` entry point for the neuron backend "
                  "(installed before it was declared); registering it directly. Reinstall the package "
                  "(`pip install -e .`, or scripts/setup.sh) to load it through its entry point.")
    register_backend(neuron_backend, name="neuron")


def _register_with_inductor() -> None:
    from . import inductor_device
    inductor_device.register()
