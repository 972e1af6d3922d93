"""Compile one AOTAutograd graph (forward, backward or inference) into a NeuronGraph.

compile_fx (Inductor's driver) does the Dynamo-graph work: decompositions,
AOTAutograd tracing of forward and backward, joint-graph passes, partitioning.
It then hands each resulting ATen graph to an "inner compiler"; this module is
that inner compiler. It retargets the graph to the host (host_graph.py), looks
it up in the NEFF cache, and on a miss runs Inductor's C++ code generation on
it (compile_fx_inner), then makes the result run on device memory (launch.py).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import torch.fx

from . import host_graph, neff_cache, stats
from .launch import NeuronGraph, device_callable


def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> NeuronGraph:
    from torch._inductor.compile_fx import compile_fx_inner

    start = time.perf_counter()
    kind = "backward" if kwargs.get("is_backward") else ("inference" if kwargs.get("is_inference") else "forward")
    host = host_graph.to_host(gm, example_inputs)

    def build():
        return compile_fx_inner(host.gm, host.example_inputs, **kwargs)

    compiled, cache_hit = neff_cache.load_or_build(host.gm, host.example_inputs, kind, kwargs, build)
    graph = NeuronGraph(device_callable(compiled, host.plan.device_index), host.plan, name=kind)
    stats.record_neff(kind, cache_hit, time.perf_counter() - start)
    return graph
