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

from . import static_shapes, stats
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


setattr(neuron_backend, static_shapes.NEURON_RULES, True)


@contextlib.contextmanager
def _without_aot_autograd_cache():
    import torch._functorch.config as functorch_config
    with functorch_config.patch(enable_autograd_cache=False):
        yield


def _require_static_shapes(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> None:
    """Neuron compiles one graph per input shape: reject graphs traced with symbolic sizes."""
    from torch.fx.experimental.symbolic_shapes import free_symbols
    names = stats.input_names(gm, len(example_inputs))
    # The traced placeholders carry the symbolic sizes (the example inputs may be the real tensors).
    traced = [n.meta.get("example_value", n.meta.get("val")) for n in gm.graph.nodes if n.op == "placeholder"]
    traced += [None] * (len(example_inputs) - len(traced))
    shape_symbols = set()
    for v in list(traced) + list(example_inputs):
        if isinstance(v, torch.Tensor):
            for s in list(v.shape) + list(v.stride()):
                shape_symbols |= free_symbols(s)
    for name, x, t in zip(names, example_inputs, traced):
        # A symbolic int that no tensor's shape depends on (static_shapes.CONTROL_INT_SOURCES) is a value
        # passed to the graph, not a dynamic shape: symbolic tensor sizes, and ints they use, are rejected.
        value = t if t is not None else x
        if isinstance(value, torch.SymInt) or isinstance(x, torch.SymInt):
            dynamic = bool(free_symbols(value if isinstance(value, torch.SymInt) else x) & shape_symbols)
        else:
            dynamic = isinstance(value, torch.Tensor) and any(
                free_symbols(s) for s in list(value.shape) + list(value.stride()))
        if dynamic:
            raise NeuronCompileError(
                f"torch.compile(backend='neuron') compiles static shapes only, but input {name} was traced with "
                f"symbolic sizes ({tuple(x.shape) if isinstance(x, torch.Tensor) else x}): Neuron compiles one "
                f"graph per input shape. Do not pass dynamic=True or mark dimensions dynamic "
                f"(torch._dynamo.mark_dynamic); pad inputs to fixed sizes (e.g. multiples of 128) instead.")
