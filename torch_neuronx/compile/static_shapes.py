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


# Attribute of a backend callable that gets the neuron backend's compile rules from torch.compile
# (neuron_backend itself, and cpu_reference.inductor_cpu, which compiles CPU graphs the same way).
NEURON_RULES = "_neuron_static_shape_rules"


def _is_neuron_backend(backend: Any) -> bool:
    """backend="neuron", or a backend callable that compiles under Neuron's rules (NEURON_RULES)."""
    if isinstance(backend, str):
        return backend == "neuron"
    return bool(getattr(backend, NEURON_RULES, False))


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
        if not isinstance(compiled, torch.nn.Module):
            compiled = _with_control_ints_symbolic(compiled)
        return compiled

    compile._neuron_static_shapes = True  # type: ignore[attr-defined]
    torch.compile = compile


# Python ints that a static cache keeps only to choose a code path, matched as Dynamo source names.
# Transformers' static sliding-window layer counts the tokens it has seen in `cumulative_length_int`
# (a tensor holds the same count for the graph's arithmetic) and reads it only for `is_full`.
# Specialized, as dynamic=False specializes every int, each decode step would be a new graph (its
# value is a new guard) until Dynamo's recompile limit sends decoding back to eager. Traced as a
# symbolic int instead, the guards say "not full" / "full": two decode graphs, as Neuron compiles for
# the two code paths, and no tensor shape is symbolic (backend.py still rejects those).
CONTROL_INT_SOURCES = r".*\.cumulative_length_int$"


def _with_control_ints_symbolic(compiled: Any) -> Any:
    """A compiled function whose calls (when Dynamo traces) treat CONTROL_INT_SOURCES as symbolic ints."""

    @functools.wraps(compiled)
    def call(*args: Any, **kwargs: Any) -> Any:
        config = torch.compiler.config
        saved = config.dynamic_sources
        if CONTROL_INT_SOURCES in saved:
            return compiled(*args, **kwargs)
        config.dynamic_sources = f"{saved},{CONTROL_INT_SOURCES}" if saved else CONTROL_INT_SOURCES
        try:
            return compiled(*args, **kwargs)
        finally:
            config.dynamic_sources = saved

    return call
