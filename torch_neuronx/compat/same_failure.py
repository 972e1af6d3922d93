"""When a failure on CPU is the same failure as neuron's: what lets a compiled failure leave the count.

A compiled step that fails on neuron is run again on CPU, compiled by Inductor under the same rules
(compat/cpu_reference.py). Only the *same* failure there makes it the model's rather than the plugin's,
and the same category is not enough: one graph break on CPU would excuse any number of neuron-only
breaks. The same failure is

  - the same category;
  - for graph breaks, the same number of breaks with the same reasons (reason and code location);
  - for recompiles, the same number with the same reasons (Dynamo's guard);
  - for an exception, the same exception type, naming the same ATen ops.

(For numbers, the workers also require CPU's compiled numbers to equal neuron's.)

A failure is recorded as a `signature` (plain JSON, kept in the step next to the verdict); `differences`
lists what differs between neuron's and CPU's, empty when they are the same failure. Device names and
installation paths are left out of reasons first: "neuron:0" against "cpu" in a guard, or a checkout's
absolute path, does not make another failure.
"""

from __future__ import annotations

import re
from collections import Counter

from .categories import GRAPH_BREAK, RECOMPILE

_DEVICE = re.compile(r"\b(?:neuron|cpu)(?::\d+)?\b")
_OP = re.compile(r"\baten(?:::|\.)([A-Za-z0-9_]+)")


def _normalized(reason: str) -> str:
    from .paths import relative_paths
    return _DEVICE.sub("<device>", relative_paths(reason))


def signature(category: str | None, counts=None, exc: BaseException | None = None) -> dict:
    """What identifies a failure: its category, and the breaks, recompiles or exception behind it.

    counts: the step's compile_counters.CompileCounts; exc: the exception the step raised, if it raised."""
    sig: dict = {"category": category}
    if counts is not None and category == GRAPH_BREAK:
        sig["graph_breaks"] = sorted(_normalized(r) for r in counts.break_reasons)
    if counts is not None and category == RECOMPILE:
        sig["recompiles"] = sorted(_normalized(r) for r in counts.recompile_reasons)
    if exc is not None:
        sig["exception"] = type(exc).__name__
        sig["ops"] = sorted(set(_OP.findall(str(exc))))
    return sig


def differences(neuron: dict, cpu: dict) -> list[str]:
    """What makes CPU's failure another one than neuron's (empty: the same failure)."""
    if neuron.get("category") != cpu.get("category"):
        return [f"category: {neuron.get('category')} on neuron, {cpu.get('category')} on CPU"]
    out = []
    for key, what in (("graph_breaks", "graph break"), ("recompiles", "recompile")):
        n, c = neuron.get(key), cpu.get(key)
        if n is None and c is None:
            continue
        n, c = n or [], c or []
        if len(n) != len(c):
            out.append(f"{what}s: {len(n)} on neuron, {len(c)} on CPU")
        elif Counter(n) != Counter(c):
            only = sorted((Counter(n) - Counter(c)).elements())
            out.append(f"{what} reasons differ: neuron has {only[0]!r}")
    if neuron.get("exception") != cpu.get("exception"):
        out.append(f"exception: {neuron.get('exception')} on neuron, {cpu.get('exception')} on CPU")
    elif neuron.get("ops") != cpu.get("ops"):
        out.append(f"ops named: {', '.join(neuron.get('ops') or []) or 'none'} on neuron, "
                   f"{', '.join(cpu.get('ops') or []) or 'none'} on CPU")
    return out
