"""Graphs compiled, recompiles and graph breaks, read around one compiled step.

The numbers come from `torch_neuronx.compile_stats()` (the neuron compile
backend's own account). Until that backend is installed, TorchDynamo's
counters give the same three numbers for whatever backend ran. A step's
numbers are the difference of two snapshots, so steps do not add up.
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


def _describe(entry) -> str:
    """One line for a graph-break / recompile entry (a dict with a reason, or a string)."""
    if isinstance(entry, dict):
        reason = str(entry.get("reason", entry)).strip().splitlines()
        where = entry.get("location") or entry.get("function") or ""
        return (reason[0] if reason else "") + (f" at {where}" if where else "")
    return str(entry).strip().splitlines()[0] if str(entry).strip() else ""


def _pick(stats: dict, *words: str) -> int:
    """The first integer entry whose key contains all `words` (the stats dict's key names may evolve)."""
    for key, value in stats.items():
        k = key.lower().replace("_", " ")
        if all(w in k for w in words) and isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
    return 0


def _reasons(stats: dict) -> list[str]:
    for key, value in stats.items():
        if "reason" in key.lower() and isinstance(value, (list, tuple)):
            return [str(v) for v in value]
        if "reason" in key.lower() and isinstance(value, dict):
            return [f"{k} (x{v})" if isinstance(v, int) else str(k) for k, v in value.items()]
    return []


def snapshot() -> CompileCounts:
    """The process's compile counts now."""
    try:
        import torch_neuronx
        stats = torch_neuronx.compile_stats()
    except (ImportError, AttributeError):
        stats = None
    if isinstance(stats, dict) and "graphs_compiled" in stats:
        # torch_neuronx.compile.stats: recompiles and graph_breaks are lists of entries
        breaks = list(stats.get("graph_breaks") or [])
        recompiles = list(stats.get("recompiles") or [])
        return CompileCounts(graphs=int(stats["graphs_compiled"]), recompiles=len(recompiles),
                             graph_breaks=len(breaks),
                             break_reasons=[_describe(b) for b in breaks],
                             recompile_reasons=[_describe(r) for r in recompiles])
    if isinstance(stats, dict):
        breaks = _pick(stats, "break")
        return CompileCounts(graphs=_pick(stats, "graph", "compiled") or _pick(stats, "graphs"),
                             recompiles=_pick(stats, "recompile"), graph_breaks=breaks, break_reasons=_reasons(stats))
    return _dynamo_snapshot()


def _dynamo_snapshot() -> CompileCounts:
    from torch._dynamo.utils import counters
    # torch 2.13 files graph breaks under "unimplemented" (older: "graph_break")
    breaks = dict(counters.get("graph_break", {})) or dict(counters.get("unimplemented", {}))
    reasons = [f"{str(r).splitlines()[0]} (x{n})" for r, n in breaks.items()]
    return CompileCounts(graphs=int(counters.get("stats", {}).get("unique_graphs", 0)),
                         recompiles=int(sum(counters.get("recompiles", {}).values())),
                         graph_breaks=int(sum(breaks.values())), break_reasons=reasons)


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
