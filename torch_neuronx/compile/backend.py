"""The Dynamo backend "neuron": torch.compile(model, backend="neuron").

Each graph Dynamo captures is compiled with static shapes, as Neuron compiles
a graph to a NEFF for exactly one set of input shapes. Inductor's driver
(compile_fx) runs AOTAutograd (forward and backward graphs for training);
compiler.py turns each of those graphs into fused host kernels for the
emulated NeuronCore, cached on disk (neff_cache.py). Every compiled graph,
recompile and graph break is accounted in stats.py.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Sequence

import torch

from . import stats
from .errors import NeuronCompileError

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

    stats.begin_graph(gm, example_inputs)
    _require_static_shapes(gm, example_inputs)
    start = time.perf_counter()
    config = dict(INDUCTOR_CONFIG)
    config.update(options or {})
    with _without_aot_autograd_cache():
        from .compiler import compile_graph
        compiled = compile_fx(gm, list(example_inputs), inner_compile=compile_graph, config_patches=config)
    stats.end_graph(time.perf_counter() - start)
    return compiled


@contextlib.contextmanager
def _without_aot_autograd_cache():
    import torch._functorch.config as functorch_config
    with functorch_config.patch(enable_autograd_cache=False):
        yield


def _require_static_shapes(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> None:
    """Neuron compiles one graph per input shape: reject graphs traced with symbolic sizes."""
    from torch.fx.experimental.symbolic_shapes import free_symbols
    names = stats.input_names(gm, len(example_inputs))
    for name, x in zip(names, example_inputs):
        dynamic = isinstance(x, torch.SymInt) or (
            isinstance(x, torch.Tensor) and any(free_symbols(s) for s in list(x.shape) + list(x.stride())))
        if dynamic:
            raise NeuronCompileError(
                f"torch.compile(backend='neuron') compiles static shapes only, but input {name} was traced with "
                f"symbolic sizes ({tuple(x.shape) if isinstance(x, torch.Tensor) else x}): Neuron compiles one "
                f"graph per input shape. Do not pass dynamic=True or mark dimensions dynamic "
                f"(torch._dynamo.mark_dynamic); pad inputs to fixed sizes (e.g. multiples of 128) instead.")
