"""Static shapes for backend="neuron": torch.compile(..., backend="neuron") means dynamic=False.

Neuron compiles a graph for one set of input shapes. Dynamo's default
(dynamic=None) recompiles a graph whose input shape changed with symbolic
sizes ("automatic dynamic shapes"); a Neuron graph must instead be compiled
again for the new shape. Only torch.compile knows both the backend and the
`dynamic` argument (a backend is not told), and the backend runs after Dynamo
has already traced, so the choice is made here: torch.compile is wrapped
once at plugin load, and for backend="neuron" it rejects dynamic=True and
passes dynamic=False, which makes Dynamo specialise every shape. Other
backends are passed through untouched.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from .errors import NeuronCompileError

DYNAMIC_REJECTED = (
    "torch.compile(backend='neuron', dynamic=True) is not supported: Neuron compiles each graph for "
    "static input shapes, and every new shape is compiled as a new graph. Leave `dynamic` unset (the "
    "neuron backend uses dynamic=False) and pad inputs to fixed sizes (e.g. sequence length to a "
    "multiple of 128, a static KV cache for generation) so that one compiled graph serves all steps.")


def _is_neuron_backend(backend: Any) -> bool:
    if isinstance(backend, str):
        return backend == "neuron"
    from .backend import neuron_backend
    return backend is neuron_backend


def install() -> None:
    original = torch.compile
    if getattr(original, "_neuron_static_shapes", False):
        return

    @functools.wraps(original)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        if not _is_neuron_backend(kwargs.get("backend", "inductor")):
            return original(model, **kwargs)
        if kwargs.get("dynamic"):
            raise NeuronCompileError(DYNAMIC_REJECTED)
        kwargs["dynamic"] = False
        compiled = original(model, **kwargs)
        from .logging_calls import ignore_library_logging
        ignore_library_logging()  # before the first call traces the model
        return compiled

    compile._neuron_static_shapes = True  # type: ignore[attr-defined]
    torch.compile = compile
