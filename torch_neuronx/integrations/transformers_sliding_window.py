"""Transformers' static sliding-window cache keeps its token count as a Python int (Transformers 5.23).

The failure. The static sliding-window layer (cache_utils.py) counts the tokens it has seen twice: in a
tensor, for the graph's arithmetic, and in the Python int `cumulative_length_int`, read only to decide
whether the window is full (`is_full`). Dynamo specialises Python ints under `dynamic=False` (what
generate() compiles with, and what Neuron's one-graph-per-shape rule needs for tensor sizes), so each
value is a new guard: every decode step recompiles, until Dynamo's recompile limit sends decoding back
to eager. Neuron compiles one graph per code path, so decoding should compile two: window filling,
window full.

The shim: Dynamo traces that one int as a symbolic int (`torch.compiler.config.dynamic_sources`, whose
entries win over dynamic=False), only in calls of functions compiled with backend="neuron" (the
backend's Dynamo settings, compile/static_shapes.py). Its guard is then the fill test
(`cumulative_length_int <= N`): two graphs. No tensor shape depends on it, so the backend's static-shape
check still holds. The attribute's name is spelled here only.

Upstream fix that removes it: Transformers keeps that count as a `torch.fx.experimental.sym_node.DynamicInt`
(Dynamo always traces those as symbolic), or decides `is_full` from the tensor it keeps anyway.
"""

from __future__ import annotations

from .written_for import transformers_matches

TOKEN_COUNT = "cumulative_length_int"  # the layer's Python int, as Dynamo's sources and guards name it
DYNAMIC_SOURCE = rf".*\.{TOKEN_COUNT}$"  # a dynamic_sources entry: that attribute of any object


def dynamic_sources(current: str) -> str:
    """`torch.compiler.config.dynamic_sources` with the token count added (the user's entries kept)."""
    if not transformers_matches("transformers_sliding_window") or DYNAMIC_SOURCE in current.split(","):
        return current
    return f"{current},{DYNAMIC_SOURCE}" if current else DYNAMIC_SOURCE


def is_window_fill_guard(dynamo_reason: str) -> bool:
    """Is this recompile reason the fill test of a sliding window (the second decode graph, expected)?"""
    return TOKEN_COUNT in dynamo_reason and "==" not in dynamo_reason.split("#")[0]
