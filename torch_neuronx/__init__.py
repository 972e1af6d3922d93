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

from . import _C  # noqa: E402  (the C++ core registers allocator, guard, hooks, kernels)
from . import runtime  # noqa: E402

_C._route_ops_with_host_kernels_to_fallback()  # after the core's static registrations: see csrc/aten/RegisterFallback.cpp
runtime.init()

from . import _registration  # noqa: E402

_registration.register()

from .neuron import *  # noqa: E402,F401,F403  (torch_neuronx.is_available() etc., as torch.neuron)
from .ops_report import (  # noqa: E402
    clear_op_tracking, get_emulator_op_counts, get_executed_ops, get_fallback_ops, get_op_signature_counts,
    reset_op_counts)
from .dtypes import set_fp64_mode, set_int64_mode  # noqa: E402


def compile_stats() -> dict:
    """Graphs compiled, cache hits, recompiles and graph breaks (with reasons), compile seconds."""
    from .compile import stats
    return stats.compile_stats()

