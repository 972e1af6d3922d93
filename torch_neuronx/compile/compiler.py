"""Compile one AOTAutograd graph (forward, backward or inference) into a NeuronGraph.

compile_fx (Inductor's driver) does the Dynamo-graph work: decompositions,
AOTAutograd tracing of forward and backward, joint-graph passes, partitioning.
It then hands each resulting ATen graph to an "inner compiler"; this module is
that inner compiler. It retargets the graph to the host (host_graph.py), looks
it up in the NEFF cache, and on a miss runs Inductor's C++ code generation on
it (compile_fx_inner), then makes the result run on device memory (launch.py).

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

from . import host_graph, neff_cache, stats
from .cache_trust import Untrusted
from .errors import NeuronCompileError
from .launch import NeuronGraph, device_callable


def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> NeuronGraph:
    from torch._inductor.compile_fx import compile_fx_inner

    start = time.perf_counter()
    require_private_inductor_dir()
    kind = "backward" if kwargs.get("is_backward") else ("inference" if kwargs.get("is_inference") else "forward")
    host = host_graph.to_host(gm, example_inputs)

    def build():
        return _rebuilding_damaged_libraries(lambda: compile_fx_inner(host.gm, host.example_inputs, **kwargs))

    compiled, cache_hit = neff_cache.load_or_build(host.gm, host.example_inputs, kind, kwargs, build)
    graph = NeuronGraph(device_callable(compiled, host.plan.device_index), host.plan, name=kind)
    stats.record_neff(kind, cache_hit, time.perf_counter() - start)
    return graph


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
