"""Compile one AOTAutograd graph (forward, backward or inference) into a NeuronGraph.

compile_fx (Inductor's driver) does the Dynamo-graph work: decompositions,
AOTAutograd tracing of forward and backward, joint-graph passes, partitioning.
It then hands each resulting ATen graph to an "inner compiler"; this module is
that inner compiler. It lowers a copy of the graph to StableHLO as TorchNeuron does
(lowering.py: a graph Trainium cannot compile fails here), retargets the graph
to the host (host_graph.py), looks both up in the NEFF cache, and on a miss
lowers it and runs Inductor's C++ code generation on it (compile_fx_inner),
then makes the result run on device memory (launch.py).

Inductor keeps the kernel libraries it builds in its own directory and reuses
any file it finds there. A compile killed while writing one (a timeout, Ctrl-C)
leaves a truncated library that every later compile of the same kernel would
fail to load ("file too short"); such a library is deleted and built again,
as the NEFF cache does with its own damaged entries.

Inductor loads whatever it finds in that directory, so a neuron graph is
compiled only when the directory is private to the user (neff_cache.inductor_dir):
a library another user could put there would run in this process.
"""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any, Callable, Sequence

import torch.fx

from . import artifacts, host_graph, lowering, neff_cache, stats
from .cache_trust import Untrusted
from .errors import NeuronCompileError, NeuronLoweringError
from .launch import NeuronGraph, device_callable


def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> NeuronGraph:
    from torch._inductor.compile_fx import compile_fx_inner

    start = time.perf_counter()
    require_private_inductor_dir()
    kind = "backward" if kwargs.get("is_backward") else ("inference" if kwargs.get("is_inference") else "forward")
    lowering_mode = lowering.mode()
    # The lowering stage works on a copy taken before the executed graph is retargeted to the host;
    # that copy is also the graph run eagerly if it does not lower and fallback execution is on.
    device_graph = lowering.prepare(gm) if lowering_mode != "off" else None
    artifacts.begin_graph()
    host = host_graph.to_host(gm, example_inputs)

    def build():
        return _rebuilding_damaged_libraries(lambda: compile_fx_inner(host.gm, host.example_inputs, **kwargs))

    def lower() -> str:
        return lowering.lower(lowering.prepare(device_graph), kind).stablehlo

    try:
        compiled, stablehlo, cache_hit = neff_cache.load_or_build(
            host.gm, host.example_inputs, kind, kwargs, build, lower=lower if device_graph is not None else None,
            lowering=lowering.fingerprint() if device_graph is not None else "")
    except NeuronLoweringError as e:
        from .backend import fallback_execution_disabled
        if fallback_execution_disabled():
            raise
        return _eager_fallback(device_graph, e, kind)
    if cache_hit and device_graph is not None:
        artifacts.save_cached(lowering.prepare(device_graph), stablehlo, kind)
    call = device_callable(compiled, host.plan.device_index)
    if lowering_mode == "check":
        from .lowering_check import checked_once
        call = checked_once(call, stablehlo, kind)
    graph = NeuronGraph(call, host.plan, name=kind, mutated_inputs=getattr(compiled, "mutated_input_idxs", ()) or ())
    stats.record_neff(kind, cache_hit, time.perf_counter() - start)
    return graph


def _eager_fallback(device_graph: torch.fx.GraphModule, error: NeuronLoweringError, kind: str) -> Any:
    """TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0: a graph that does not lower runs eagerly on neuron."""
    from .backend import FALLBACK_SWITCH
    log.warning("neuron: this %s graph does not compile for Trainium (%s does not lower to StableHLO, made by %s); "
                "running it eagerly because %s=0.", kind, error.op or "an op", error.location or "unknown code",
                FALLBACK_SWITCH)
    stats.record_eager_graph(kind, error.op)
    run = torch.fx.Interpreter(device_graph).boxed_run

    def eager(args: list[Any]) -> list[Any]:
        outputs = run(args)
        return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    eager._boxed_call = True
    return eager


log = logging.getLogger("torch_neuronx.compile")


def require_private_inductor_dir() -> str:
    """Inductor's kernel directory, or a NeuronCompileError if another user could write into it."""
    try:
        return neff_cache.inductor_dir()
    except Untrusted as e:
        raise NeuronCompileError(
            f"Not compiling: Inductor's kernel directory {e.path} {e.reason}. Inductor loads any kernel library "
            f"and wrapper module it finds there, so code another user put there would run in this process. "
            f"Set TORCHINDUCTOR_CACHE_DIR to a directory only you can write (e.g. ~/.cache/torchinductor), or "
            f"remove {e.path} if it is yours.") from None


# How the dynamic loader reports a library that is not a complete shared object.
_DAMAGED_LIBRARY = re.compile(r"(/\S+\.so): (file too short|invalid ELF header|ELF load command[^\n]*|"
                              r"cannot read file data[^\n]*|unexpected reloc type[^\n]*)")
_MAX_REBUILDS = 8  # one damaged library is found per attempt


def _damaged_library(error: BaseException) -> tuple[str, str] | None:
    """(path, loader message) when `error` (or its cause) is a damaged library in Inductor's directory.

    Only a library inside the checked-private directory is ever deleted: the path comes from a loader
    message, and nothing outside what the user owns is touched.
    """
    root = require_private_inductor_dir()
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        match = _DAMAGED_LIBRARY.search(str(error))
        if match and os.path.realpath(match.group(1)).startswith(root + os.sep):
            return match.group(1), match.group(2)
        error = error.__cause__ or error.__context__
    return None


def _rebuilding_damaged_libraries(compile_fn: Callable[[], Any]) -> Any:
    from torch._inductor.codecache import CppCodeCache, CppPythonBindingsCodeCache
    for attempt in range(_MAX_REBUILDS + 1):
        try:
            return compile_fn()
        except Exception as e:
            damaged = _damaged_library(e)
            if damaged is None or attempt == _MAX_REBUILDS:
                raise
            path, why = damaged
            log.warning("neuron: Inductor's kernel library %s is damaged (%s; a compile killed while writing it?): "
                        "deleting it and compiling again.", path, why)
            stats.record_corrupt_entry()
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
            # the in-memory caches hold loaders bound to the damaged file
            CppPythonBindingsCodeCache.cache_clear()
            CppCodeCache.cache_clear()
    raise AssertionError("unreachable")
