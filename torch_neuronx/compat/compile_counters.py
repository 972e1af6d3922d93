"""Graphs compiled, recompiles and graph breaks, read around one compiled step.

The numbers come from `torch_neuronx.compile_stats()`: the neuron compile
backend's own account, which the CPU reference backend
(compat/cpu_reference.py) keeps too. A step's numbers are the difference of
two snapshots, so steps do not add up.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Iterator


@dataclass
class CompileCounts:
    graphs: int = 0
    recompiles: int = 0
    graph_breaks: int = 0
    break_reasons: list[str] = field(default_factory=list)
    recompile_reasons: list[str] = field(default_factory=list)

    def __sub__(self, before: "CompileCounts") -> "CompileCounts":
        return CompileCounts(self.graphs - before.graphs, self.recompiles - before.recompiles,
                             self.graph_breaks - before.graph_breaks,
                             self.break_reasons[len(before.break_reasons):],
                             self.recompile_reasons[len(before.recompile_reasons):])


def _describe(entry: dict) -> str:
    """One line for a graph-break entry (reason, location) or a recompile entry (reason, function)."""
    reason = str(entry["reason"]).strip().splitlines()
    where = entry.get("location") or entry.get("function") or ""
    return (reason[0] if reason else "") + (f" at {where}" if where else "")


def snapshot() -> CompileCounts:
    """The process's compile counts now (torch_neuronx.compile_stats(): recompiles and graph breaks are lists)."""
    import torch_neuronx
    stats = torch_neuronx.compile_stats()
    breaks, recompiles = stats["graph_breaks"], stats["recompiles"]
    return CompileCounts(graphs=stats["graphs_compiled"], recompiles=len(recompiles), graph_breaks=len(breaks),
                         break_reasons=[_describe(b) for b in breaks],
                         recompile_reasons=[_describe(r) for r in recompiles])


@contextlib.contextmanager
def counting_from_scratch() -> Iterator[CompileCounts]:
    """Empty Dynamo's cache, then count what the block compiles (its own graphs and recompiles only).

    The yielded counts are filled in when the block ends, also when it raises.
    """
    import torch
    torch._dynamo.reset()
    counts = CompileCounts()
    before = snapshot()
    try:
        yield counts
    finally:
        vars(counts).update(vars(snapshot() - before))
