"""Compile accounting: what torch_neuronx.compile_stats() and torch.neuron.get_dynamo_metrics() report.

On Neuron every new input shape is a new graph to compile, and recompiling
every step is the most common performance complaint. So each compiled graph
is counted, each recompile is logged with the input whose shape changed and
what to do about it, and each graph break is recorded with its reason.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Sequence

import torch

from ..integrations import transformers_sliding_window

log = logging.getLogger("torch_neuronx.compile")

PAD_MULTIPLE = 128  # Neuron's preferred tile multiple for padded sequence/batch sizes

_lock = threading.Lock()
_state: dict[str, Any] = {}
_signatures: dict[int, list[dict[str, tuple]]] = {}  # Dynamo frame id -> input signatures compiled so far
_logged_breaks: set[tuple[str, str]] = set()
_in_backend = threading.local()


def reset() -> None:
    """Forget all counts (torch.neuron.reset_dynamo_metrics)."""
    with _lock:
        _state.clear()
        _state.update(graphs_compiled=0, neffs_built=0, cache_hits=0, cache_corrupt_entries=0,
                      cache_rejected_entries=0, graphs_lowered=0, compile_seconds=0.0, lowering_seconds=0.0,
                      recompiles=[], graph_breaks=[], eager_graphs=[], lowering_checks=[])
        _signatures.clear()
        _logged_breaks.clear()


reset()


def compile_stats() -> dict[str, Any]:
    """Counts since the start of the process (or the last reset()).

    graphs_compiled   graphs Dynamo captured and the neuron backend compiled (one per input shape)
    neffs_built       compiled units (forward, backward or inference graphs) generated from scratch
    cache_hits        compiled units loaded from the NEFF cache instead (TORCH_NEURONX_NEFF_CACHE_DIR)
    cache_corrupt_entries  cache entries found damaged, deleted and rebuilt
    cache_rejected_entries cache entries not read because they could not be trusted (another user's file,
                      a directory others can write, a failed authentication in a shared cache)
    graphs_lowered    compiled units lowered to StableHLO (lowering.py; a cache hit lowers nothing)
    lowering_checks   TORCHNEURON_LOWERING=check: one entry per graph whose StableHLO ran in the reference
                      interpreter against the executed result (kind, checked, outputs, max_abs_diff)
    recompiles        one entry per recompile: function, reason, changed inputs (name, old, new shape)
    graph_breaks      one entry per graph break: reason and user code location
    eager_graphs      graphs run eagerly because they do not lower (TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0):
                      kind (forward, backward, inference) and op
    compile_seconds   wall time spent compiling
    lowering_seconds  the part of it spent lowering to StableHLO
    """
    with _lock:
        out = {k: (list(v) if isinstance(v, list) else v) for k, v in _state.items()}
    out["num_recompiles"] = len(out["recompiles"])
    out["num_graph_breaks"] = len(out["graph_breaks"])
    return out


def input_names(gm: torch.fx.GraphModule, count: int) -> list[str]:
    """User-facing names of the graph inputs (Dynamo sources such as L['input_ids'])."""
    names = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        source = getattr(node.meta.get("grapharg"), "source", None)
        name = getattr(source, "name", None) if source is not None else None
        names.append((name() if callable(name) else name) or node.target)
    names += [f"input {i}" for i in range(len(names), count)]
    return names[:count]


def _signature(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> dict[str, tuple]:
    sig = {}
    for name, x in zip(input_names(gm, len(example_inputs)), example_inputs):
        if isinstance(x, torch.Tensor):
            sig[name] = (tuple(x.shape), x.dtype)
        elif isinstance(x, (int, float, bool)):
            sig[name] = (x, type(x))
    return sig


def _frame_and_compile_index() -> tuple[int | None, int]:
    from torch._guards import CompileContext
    compile_id = CompileContext.current_compile_id()
    if compile_id is None:
        return None, 0
    return compile_id.frame_id, compile_id.frame_compile_id or 0


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))


def _is_library_code(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(_TORCH_DIR) or "site-packages" in path or "dist-packages" in path


def _function_name(gm: torch.fx.GraphModule) -> str:
    """The user function whose frame Dynamo is compiling.

    For a compiled nn.Module, Dynamo's frame is a wrapper (torch's call wrapper, a library's
    decorator); the user's code is then the forward of the outermost module the graph records.
    """
    code, owner = None, None
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator
        tx = InstructionTranslator.current_tx()
        code, owner = tx.f_code, tx.f_locals.get("self")
    except Exception:
        pass
    if code is not None and not _is_library_code(code.co_filename):
        return f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
    if isinstance(owner, torch.nn.Module):  # a library decorator around a module's forward
        return f"{type(owner).__qualname__}.forward"
    for node in gm.graph.nodes:
        stack = node.meta.get("nn_module_stack")
        if stack:
            _, module_type = next(iter(stack.values()))
            name = getattr(module_type, "__qualname__", None) or str(module_type).rsplit(".", 1)[-1]
            return f"{name}.forward"
    if code is not None:
        return f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
    return "<unknown function>"


def _dynamo_recompile_reason() -> str | None:
    try:
        from torch._dynamo.utils import get_metrics_context
        return get_metrics_context()._metrics.get("recompile_reason")  # what Dynamo found the guards failed on
    except Exception:
        return None


def _changed_inputs(old: dict[str, tuple], new: dict[str, tuple]) -> list[dict[str, Any]]:
    changed = []
    for name, (value, kind) in new.items():
        if name in old and old[name] != (value, kind):
            changed.append({"input": name, "old": old[name][0], "new": value,
                            "old_dtype": str(old[name][1]), "new_dtype": str(kind)})
    return changed


def _closest(previous: list[dict[str, tuple]], sig: dict[str, tuple]) -> dict[str, tuple]:
    return min(previous, key=lambda old: len(_changed_inputs(old, sig)))


def _advice(changed: list[dict[str, Any]], reason: str = "") -> str:
    if transformers_sliding_window.is_window_fill_guard(reason):
        return ("The static cache's sliding window filled up: decoding with a full window is the second "
                "decode graph (compiled once).")
    dims = []
    for c in changed:
        old, new = c["old"], c["new"]
        if isinstance(old, tuple) and isinstance(new, tuple) and len(old) == len(new):
            for d, (a, b) in enumerate(zip(old, new)):
                if a != b:
                    padded = -(-max(a, b) // PAD_MULTIPLE) * PAD_MULTIPLE
                    dims.append(f"{c['input']} dim {d}: {a} -> {b}, pad to {padded}")
    if not dims:
        return "Dynamo's guards on this graph failed; keep what they check (dtypes, flags, Python values) fixed."
    return (f"Neuron compiles one graph per input shape: pad varying dimensions to a fixed size, e.g. a "
            f"multiple of {PAD_MULTIPLE} ({'; '.join(dims)}); for generation use a static KV cache "
            f"(cache_implementation=\"static\").")


def begin_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> None:
    """Called by the backend for each graph Dynamo captured: count it, explain recompiles and graph breaks."""
    frame_id, compile_index = _frame_and_compile_index()
    sig = _signature(gm, example_inputs)
    break_reason = getattr(gm, "compile_subgraph_reason", None)
    is_break = break_reason is not None and getattr(break_reason, "graph_break", False)
    where = _user_location(break_reason) if is_break else ""
    with _lock:
        _state["graphs_compiled"] += 1
        previous = _signatures.setdefault(frame_id, []) if frame_id is not None else []
        recompile = None
        if compile_index > 0 and previous:
            changed = _changed_inputs(_closest(previous, sig), sig)
            dynamo_reason = _dynamo_recompile_reason() or "guard failure"
            recompile = {"function": _function_name(gm), "reason": _describe(changed) or dynamo_reason,
                         "changed_inputs": changed, "dynamo_reason": dynamo_reason,
                         "graph": _state["graphs_compiled"]}
            _state["recompiles"].append(recompile)
        if frame_id is not None:
            previous.append(sig)
        new_break = False
        if is_break:
            _state["graph_breaks"].append({"reason": str(break_reason.reason), "location": where})
            new_break = (str(break_reason.reason), where) not in _logged_breaks
            _logged_breaks.add((str(break_reason.reason), where))
    _in_backend.active = True
    if recompile:
        log.warning("neuron: recompiling %s (graph #%d): %s. %s", recompile["function"], recompile["graph"],
                    recompile["reason"], _advice(recompile["changed_inputs"], recompile["dynamo_reason"]))
    if new_break:
        log.warning("neuron: graph break at %s: %s. The code around it runs eagerly on neuron; the graph "
                    "before it is compiled on its own.", where, break_reason.reason)


def end_graph(seconds: float) -> None:
    _in_backend.active = False
    with _lock:
        _state["compile_seconds"] += seconds


def record_lowering(seconds: float) -> None:
    with _lock:
        _state["graphs_lowered"] += 1
        _state["lowering_seconds"] += seconds


def record_lowering_check(result: dict) -> None:
    with _lock:
        _state["lowering_checks"].append(result)


def record_eager_graph(kind: str, op: str | None) -> None:
    with _lock:
        _state["eager_graphs"].append({"kind": kind, "op": op})


def record_neff(kind: str, cache_hit: bool, seconds: float) -> None:
    with _lock:
        _state["cache_hits" if cache_hit else "neffs_built"] += 1
        # Backward graphs may be compiled lazily, after the backend returned: count their time here.
        if not getattr(_in_backend, "active", False):
            _state["compile_seconds"] += seconds


def record_corrupt_entry() -> None:
    with _lock:
        _state["cache_corrupt_entries"] += 1


def record_rejected_entry() -> None:
    with _lock:
        _state["cache_rejected_entries"] += 1


def _user_location(reason: Any) -> str:
    stack = getattr(reason, "user_stack", None) or []
    if not stack:
        return "<unknown location>"
    frame = stack[-1]
    return f"{frame.name} ({frame.filename}:{frame.lineno})"


def _describe(changed: list[dict[str, Any]]) -> str:
    return ", ".join(
        f"input {c['input']} changed shape {c['old']} -> {c['new']}" if c["old_dtype"] == c["new_dtype"]
        else f"input {c['input']} changed {c['old']} {c['old_dtype']} -> {c['new']} {c['new_dtype']}"
        for c in changed)
