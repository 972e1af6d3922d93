"""Inductor on CPU tensors under the neuron backend's rules: what a compiled neuron result is judged against.

When a model fails to compile cleanly on neuron (a graph break, a recompile, compiled
numbers that differ from eager), the question is whose fault it is. This backend
compiles the same model on CPU the way backend="neuron" compiles it on neuron:
torch.compile gives it the same static-shape rules (dynamic=False, the sliding-window
token count traced as a symbolic int, library logging skipped: static_shapes.py),
stats.py counts its graphs, recompiles and graph breaks the same way, and Inductor's
own CPU code generation compiles the graphs. A failure that recurs here is the model's
(or PyTorch's), not the plugin's.

    torch.compile(model, backend=inductor_cpu)                    # CPU tensors
    model.generate(..., compile_config=generate_compile_config())  # generate() compiles on CPU too
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import torch

from . import static_shapes, stats


def inductor_cpu(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], mode: str | None = None,
                 options: dict | None = None) -> Any:
    from torch._inductor.compile_fx import compile_fx
    stats.begin_graph(gm, example_inputs)
    start = time.perf_counter()
    try:
        return compile_fx(gm, list(example_inputs), config_patches=options or {})
    finally:
        stats.end_graph(time.perf_counter() - start)


setattr(inductor_cpu, static_shapes.NEURON_RULES, True)


def generate_compile_config():
    """What Transformers' generate() uses on neuron (backend, dynamic=False, mode "default"), on CPU."""
    from transformers import CompileConfig
    config = CompileConfig(backend=inductor_cpu, dynamic=False, mode="default")
    config._compile_all_devices = True  # Transformers compiles generate() on accelerators only, unless told
    return config
