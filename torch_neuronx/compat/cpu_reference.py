"""Inductor on CPU tensors under the neuron backend's rules: what a compiled neuron result is judged against.

When a model fails to compile cleanly on neuron (a graph break, a recompile, compiled
numbers that differ from eager), the question is whose fault it is. This backend
compiles the same model on CPU the way backend="neuron" compiles it on neuron:
it follows the same static-shape rules (a graph per input shape, the sliding-window
token count traced as a symbolic int, library logging skipped: compile/static_shapes.py),
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

from torch_neuronx.compile import static_shapes, stats


def inductor_cpu(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], mode: str | None = None,
                 options: dict | None = None) -> Any:
    from torch._inductor.compile_fx import compile_fx
    stats.begin_graph(gm, example_inputs)
    static_shapes.require_static_shapes(gm, example_inputs)
    start = time.perf_counter()
    try:
        return compile_fx(gm, list(example_inputs), config_patches=options or {})
    finally:
        stats.end_graph(time.perf_counter() - start)


static_shapes.follows_neuron_rules(inductor_cpu)


def generate_compile_config():
    """What Transformers' generate() uses on neuron (backend, dynamic=False, mode "default"), on CPU."""
    from transformers import CompileConfig
    config = CompileConfig(backend=inductor_cpu, dynamic=False, mode="default")
    # Transformers 5.23 compiles generate() on accelerators only; this private switch of the config
    # object (not of Transformers' modules) is how its own tests compile on CPU.
    config._compile_all_devices = True
    return config
