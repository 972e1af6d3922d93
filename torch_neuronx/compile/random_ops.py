"""Compiled dropout as TorchNeuron compiles it: masks drawn on the CPU, passed into the graph.

A NEFF has no random number generator of its own. TorchNeuron's RandomOpLegalization pass
(neuron_dynamo_backend/fx/passes/random_op_legalization.py) turns each `native_dropout(x, p, train)`
into `x * (mask * 1/(1-p))`, where `mask` is a new boolean input of the graph; before each run its
executor draws every mask in graph order with `aten.native_dropout` on CPU zeros of x's shape and
dtype (so from the CPU generator: `torch.manual_seed` decides the masks, as it decides CPU eager
dropout's) and copies it to the device.

Here the same is done on the graph Dynamo captured, before AOTAutograd: each dropout call of the
graph (F.dropout, nn.Dropout, torch.dropout; training, p in (0, 1), not in place) becomes that multiply
by a new trailing graph input, and the compiled function draws the masks before each call. So does the
dropout of scaled_dot_product_attention (dropout_p in (0, 1)): TorchNeuron decomposes it into math attention
whose native_dropout on the attention weights (batch, heads, query, key) the same pass legalizes; here the
call becomes that math attention (`attention_with_mask`) with a mask input of that shape, the mask CPU eager
attention draws (its math kernel drops the attention weights with `at::dropout`) for the same seed. The
executed graph (Inductor's) and the lowered one (lowering.py) both see the masks as inputs, the
backward multiplies by the same mask, and the masks, for a seed, are the ones TorchNeuron draws and
CPU eager dropout draws. Dropout inside a higher-order op's body (activation checkpointing) keeps
drawing from the NeuronCore's generator, replayed in the backward (integrations/checkpoint_rng_replay.py).
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Callable, Sequence

import torch
import torch.fx

from .decompositions import attention_scores, repeat_kv_heads

_DROPOUTS = {torch.nn.functional.dropout, torch.dropout, torch.ops.aten.dropout.default}
_ATTENTIONS = {torch.nn.functional.scaled_dot_product_attention, torch.ops.aten.scaled_dot_product_attention.default}
_ATTENTION_PARAMETERS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


@dataclasses.dataclass(frozen=True)
class DropoutMask:
    """One mask input of a graph: what TorchNeuron's NativeDropoutOp describes."""
    shape: tuple[int, ...]
    dtype: torch.dtype
    probability: float
    device: torch.device

    def sample(self) -> torch.Tensor:
        zeros = torch.zeros(self.shape, dtype=self.dtype)
        _, mask = torch.ops.aten.native_dropout(zeros, self.probability, True)
        return mask.to(self.device)


def _dropout_call(node: torch.fx.Node) -> tuple[torch.fx.Node, float] | None:
    """(input, p) of a legalizable dropout call."""
    if node.op != "call_function" or node.target not in _DROPOUTS:
        return None
    names = ("input", "p", "training" if node.target is torch.nn.functional.dropout else "train", "inplace")
    bound = dict(zip(names, node.args))
    bound.update(node.kwargs)
    x, p = bound.get("input"), bound.get("p", 0.5)
    training = bound.get("training", bound.get("train", True))
    if not isinstance(x, torch.fx.Node) or bound.get("inplace", False) is not False or training is not True:
        return None
    if not isinstance(p, (int, float)) or not 0.0 < float(p) < 1.0:
        return None
    value = x.meta.get("example_value")
    if not isinstance(value, torch.Tensor) or not value.dtype.is_floating_point:
        return None
    return x, float(p)


def _attention_call(node: torch.fx.Node) -> tuple[dict, tuple[int, ...], torch.dtype, float] | None:
    """(arguments, mask shape, mask dtype, p) of a scaled_dot_product_attention call with dropout."""
    if node.op != "call_function" or node.target not in _ATTENTIONS:
        return None
    bound = dict(zip(_ATTENTION_PARAMETERS, node.args))
    bound.update(node.kwargs)
    p = bound.get("dropout_p", 0.0)
    if not isinstance(p, (int, float)) or not 0.0 < float(p) < 1.0:
        return None
    values = [bound.get(name) for name in ("query", "key")]
    if not all(isinstance(v, torch.fx.Node) and isinstance(v.meta.get("example_value"), torch.Tensor) for v in values):
        return None
    query, key = (v.meta["example_value"] for v in values)
    if query.dim() < 2 or key.dim() < 2 or not query.dtype.is_floating_point:
        return None
    shape = tuple(int(s) for s in query.shape[:-1]) + (int(key.shape[-2]),)  # the attention weights
    return bound, shape, query.dtype, float(p)


def attention_with_mask(query, key, value, mask, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                        enable_gqa=False):
    """scaled_dot_product_attention as math attention, its weights dropped where `mask` is False (and the rest
    scaled by 1/(1-p)), as TorchNeuron's decomposition and legalized dropout compute it."""
    if enable_gqa:
        value = repeat_kv_heads(value, query)
    scores, _, _ = attention_scores(query, key, attn_mask, is_causal, scale)
    weights = torch.softmax(scores, dim=-1)
    return (weights * (mask.to(weights.dtype) * (1.0 / (1.0 - dropout_p)))) @ value


def _copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Dynamo's graph module with a graph of its own (Dynamo reads its graph again after the backend)."""
    import copy
    graph = torch.fx.Graph()
    mapping: dict[torch.fx.Node, torch.fx.Node] = {}
    graph.output(graph.graph_copy(gm.graph, mapping))
    for old, new in mapping.items():
        if hasattr(old, "_dynamo_source"):
            new._dynamo_source = old._dynamo_source
    module = copy.copy(gm)
    module.graph = graph
    return module


def legalize(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> tuple[torch.fx.GraphModule, list[DropoutMask]]:
    """Dynamo's graph with its dropout calls rewritten (a copy, if it has any), and their masks; the masks'
    examples are appended to `example_inputs`."""
    from torch._guards import detect_fake_mode
    if not any(_dropout_call(node) or _attention_call(node) for node in gm.graph.nodes):
        return gm, []
    gm = _copy(gm)
    calls = []  # (node, its attention call or None, its dropout call or None)
    for node in gm.graph.nodes:
        attention = _attention_call(node)
        dropout = None if attention is not None else _dropout_call(node)
        if attention is not None or dropout is not None:
            calls.append((node, attention, dropout))
    fake_mode = detect_fake_mode(example_inputs)
    last_input = [n for n in gm.graph.nodes if n.op == "placeholder"][-1]
    masks = []
    for i, (node, attention, dropout) in enumerate(calls):
        if attention is not None:
            arguments, shape, dtype, p = attention
            mask = DropoutMask(shape, dtype, p, arguments["query"].meta["example_value"].device)
        else:
            x, p = dropout
            value = x.meta["example_value"]
            mask = DropoutMask(tuple(int(s) for s in value.shape), value.dtype, p, value.device)
        with gm.graph.inserting_after(last_input):
            placeholder = gm.graph.placeholder(f"neuron_dropout_mask_{i}")
        last_input = placeholder
        placeholder._dynamo_source = None  # an input of no user code (AOTAutograd asks each input's source)
        with fake_mode if fake_mode is not None else _no_mode():
            example = torch.empty(mask.shape, dtype=torch.bool, device=mask.device)
        placeholder.meta["example_value"] = example
        example_inputs.append(example)
        with gm.graph.inserting_before(node):
            if attention is not None:
                new_nodes = [gm.graph.call_function(attention_with_mask, (), {**arguments, "mask": placeholder})]
            else:
                as_float = gm.graph.call_function(torch.Tensor.to, (placeholder, mask.dtype))
                scaled = gm.graph.call_function(operator.mul, (as_float, 1.0 / (1.0 - p)))
                new_nodes = [as_float, scaled, gm.graph.call_function(operator.mul, (x, scaled))]
        dropped = new_nodes[-1]
        for new in new_nodes:
            new.meta.update({k: v for k, v in node.meta.items() if k in ("stack_trace", "nn_module_stack")})
        node.replace_all_uses_with(dropped)
        gm.graph.erase_node(node)
        masks.append(mask)
    gm.recompile()
    return gm, masks


class _no_mode:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def drawing_masks(compiled: Callable[..., Any], masks: Sequence[DropoutMask]) -> Callable[..., Any]:
    """The compiled function (a Dynamo backend's result: called with the graph's inputs, unboxed), called
    with freshly drawn masks after the caller's arguments."""
    if not masks:
        return compiled

    def run(*args: Any) -> Any:
        return compiled(*args, *(mask.sample() for mask in masks))
    return run
