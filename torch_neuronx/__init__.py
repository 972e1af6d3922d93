"""TorchNeuron: AWS Neuron (Trainium, Inferentia) as a native PyTorch device, `neuron`.

`import torch` loads this package through the `torch.backends` entry point;
`import torch_neuronx` works too. Afterwards `torch.device("neuron")`,
`torch.neuron`, `torch.compile(backend="neuron")` and the c10d backend
"neuron" are available. Without Trainium hardware the NeuronCore emulator
runtime serves the device (see torch_neuronx.runtime).
"""

from __future__ import annotations

import os

import torch

__version__ = "0.1.0"

# Transformers' asynchronous weight loading is not supported on Neuron: loading
# must be synchronous. Set it before Transformers reads it; an explicit user
# value wins.
os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")
# Eager ops finish before the call returns, as TorchNeuron's released builds default to
# (NEURON_LAUNCH_BLOCKING=1); the emulator's kernels are synchronous whatever it says
# (torch_neuronx.utils.is_sync_mode_enabled). Set for code that reads it; a user value wins.
os.environ.setdefault("NEURON_LAUNCH_BLOCKING", "1")
# TorchNeuron's eager ops take its torch-mlir path by default (TORCH_NEURONX_MLIR_ATEN_OPS=1 in every build);
# op tracking here reports that path's op names (torch_neuronx.utils.use_mlir_aten_ops). A user value wins.
os.environ.setdefault("TORCH_NEURONX_MLIR_ATEN_OPS", "1")



def _load_core():
    """The C++ core (it registers allocator, guard, hooks, kernels), or an error that names a shadowing checkout."""
    try:
        from . import _C
    except ImportError as e:
        here = os.path.dirname(os.path.abspath(__file__))
        if any(f.startswith("_C.") for f in os.listdir(here)):
            raise  # the core is there and fails to load: its own error says why
        # The usual cause: an unbuilt source checkout first on sys.path (PYTHONPATH, or the current
        # directory under `python -m`) hides the installed package; Python then reports a circular import.
        raise ImportError(
            f"torch_neuronx was imported from {here}, which has no built C++ core (torch_neuronx/_C*.so): "
            "an unbuilt source checkout is shadowing the installed package (it comes first on sys.path through "
            "PYTHONPATH or the current directory). Fix: run from outside the checkout / unset PYTHONPATH to use "
            "the installed package, or build this checkout (`bash scripts/build.sh`, or "
            "`pip install --no-build-isolation -e .`).") from e
    return _C


_C = _load_core()
from . import runtime  # noqa: E402

_C._route_ops_with_host_kernels_to_fallback()  # after the core's static registrations: see csrc/aten/RegisterFallback.cpp
_C._set_runtime_starter(runtime.init)  # the runtime starts at first device use (runtime.init), not here

from . import _registration  # noqa: E402

_registration.register()

from .neuron import *  # noqa: E402,F401,F403  (torch_neuronx.is_available() etc., as torch.neuron)
from .ops_report import (  # noqa: E402
    clear_op_tracking, get_emulator_op_counts, get_executed_ops, get_fallback_ops, get_op_counts,
    get_op_signature_counts, reset_op_counts)
from .dtypes import set_fp64_mode, set_int64_mode  # noqa: E402
from . import log as _log  # noqa: E402

_log.configure()
from . import memory, metrics, profiling, streams, utils  # noqa: E402,F401  (TorchNeuron's module paths)
from .profiling import NeuronProfiler  # noqa: E402,F401


def _lazy_init() -> None:
    """Start the NeuronCore runtime now (it otherwise starts at first device use); raise a bad environment."""
    runtime.topology()


def is_neuron_runtime_initialized() -> bool:
    """Whether the runtime has started (first device use, `_lazy_init()` or the default process group)."""
    return runtime.started()


def compile_stats() -> dict:
    """Graphs compiled, cache hits, recompiles and graph breaks (with reasons), compile seconds."""
    from .compile import stats
    return stats.compile_stats()



# NKI kernels on the emulated NeuronCore (torch_neuronx/nki, docs/nki.md): `import nki` / `import neuronxcc.nki`
# resolve to the emulation where AWS's packages are not installed; TorchNeuron's entry points nki_op and wrap_nki
# load it on first use (it is not loaded by `import torch`).
from .nki import importer as _nki_importer  # noqa: E402

_nki_importer.install()


def __getattr__(name: str):
    if name in ("nki_op", "wrap_nki"):
        from . import nki
        return getattr(nki, name)
    raise AttributeError(f"module 'torch_neuronx' has no attribute '{name}'")
