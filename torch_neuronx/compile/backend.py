"""The Dynamo backend "neuron": torch.compile(model, backend="neuron").

Registered as the `torch_dynamo_backends` entry point "neuron" (pyproject.toml):
Dynamo imports this module the first time the name is looked up. Each graph
Dynamo captures is compiled with static shapes (static_shapes.py), as Neuron
compiles a graph to a NEFF for exactly one set of input shapes. Inductor's driver
(compile_fx) runs AOTAutograd (forward and backward graphs for training);
compiler.py turns each of those graphs into fused host kernels for the
emulated NeuronCore, cached on disk (neff_cache.py). Every compiled graph,
recompile and graph break is accounted in stats.py.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Sequence

import torch

from . import static_shapes, stats

# Inductor settings for neuron graphs. Its own FX-graph and AOTAutograd caches are off: the NEFF
# cache is the one persistent cache of compiled neuron graphs (it verifies entries; theirs don't).
INDUCTOR_CONFIG = {
    "fx_graph_cache": False,
    "fx_graph_remote_cache": False,
    "cpp_wrapper": False,
    "freezing": False,
}


def neuron_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], mode: str | None = None,
                   options: dict | None = None) -> Any:
    """Dynamo calls this once per captured graph (again after each recompile or graph break)."""
    from torch._inductor.compile_fx import compile_fx

    from . import random_ops
    if mode not in (None, "default"):
        logging.warning(f"Neuron backend does not support mode='{mode}', falling back to default mode.")
    stats.begin_graph(gm, example_inputs)
    static_shapes.require_static_shapes(gm, example_inputs)
    start = time.perf_counter()
    config = dict(INDUCTOR_CONFIG)
    config.update(options or {})
    example_inputs = list(example_inputs)
    gm, masks = random_ops.legalize(gm, example_inputs)
    try:
        with _without_aot_autograd_cache():
            from .compiler import compile_graph
            compiled = compile_fx(gm, example_inputs, inner_compile=compile_graph, config_patches=config)
    except Exception as e:
        if fallback_execution_disabled():
            raise
        # TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0: as TorchNeuron, run the graph eagerly instead.
        import warnings
        warnings.warn(f"neuron compile failed ({type(e).__name__}: {e}); running this graph eagerly because "
                      f"{FALLBACK_SWITCH}=0")
        compiled = gm.forward
    stats.end_graph(time.perf_counter() - start)
    return random_ops.drawing_masks(compiled, masks)


FALLBACK_SWITCH = "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"


def fallback_execution_disabled() -> bool:
    """TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION (default 1, as in Neuron 2.33): a compile failure raises."""
    import os
    return os.environ.get(FALLBACK_SWITCH, "1").strip().lower() not in ("0", "false")


static_shapes.follows_neuron_rules(neuron_backend)


@contextlib.contextmanager
def _without_aot_autograd_cache():
    import torch._functorch.config as functorch_config
    with functorch_config.patch(enable_autograd_cache=False):
        yield
