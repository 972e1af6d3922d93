"""Failure categories of the matrix, and how an error is sorted into one.

The category tells who has to act: a missing op or a dtype gap is the
plugin's (csrc/), a graph break or a recompile is the compile backend's, a
numeric mismatch is whichever kernel differs, and "cpu fails" / "needs
package" are not the plugin's fault at all (the architecture fails without
neuron too).
"""

from __future__ import annotations

import traceback

MISSING_OP = "missing op"
DTYPE = "dtype"
GRAPH_BREAK = "graph break"
RECOMPILE = "recompile"
NUMERIC = "numeric mismatch"
TIMEOUT = "timeout"
CRASH = "crash"  # the worker process died (signal, abort) without reporting an error
COMPILE = "compile error"  # torch.compile(backend="neuron") raised (backend missing or failed)
LOWERING = "lowering"  # a compiled graph does not lower to StableHLO: it would not compile on Trainium either (the op)
DEVICE = "device mismatch"  # a tensor stayed on the CPU (the model's fault or the plugin's placement)
ERROR = "error"  # any other exception on neuron
# Not the plugin's fault: the architecture cannot run at all here.
CPU_FAILS = "cpu fails"
NEEDS_PACKAGE = "needs package"
# Diffusers pipelines that are not run here (compat/pipelines/registry.py): not a verdict on the plugin either.
NO_BUILDER = "no tiny builder yet"  # no recipe of tiny components (yet): the matrix's own gap
NEEDS_HUB_ASSET = "needs hub asset"  # a tokenizer or processor that cannot be built offline

PLUGIN_CATEGORIES = (MISSING_OP, DTYPE, GRAPH_BREAK, RECOMPILE, NUMERIC, TIMEOUT, CRASH, COMPILE, LOWERING, DEVICE,
                     ERROR)
NOT_PLUGIN_CATEGORIES = (CPU_FAILS, NEEDS_PACKAGE, NO_BUILDER, NEEDS_HUB_ASSET)


def _inner(exc: BaseException) -> BaseException | None:
    """The error Dynamo wrapped: a compile backend's (BackendCompilerFailed), or an op's while tracing
    (TorchRuntimeError, raised `from` it)."""
    inner = getattr(exc, "inner_exception", None)
    if inner is None and type(exc).__name__ == "TorchRuntimeError":
        inner = exc.__cause__
    return inner if isinstance(inner, BaseException) else None


def first_line(exc: BaseException) -> str:
    """`Type: first line of the message` (the part of an error a table can show)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    msg = lines[0] if lines else ""
    if msg.endswith(":") and len(lines) > 1:
        # "backend='neuron' raised:" / "Class validation error for validator 'x':" - the cause is the next line
        msg = f"{msg} {lines[1]}"
    if len(msg) > 300:
        msg = msg[:297] + "..."
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def cpu_failure(exc: BaseException) -> dict:
    """The CPU record of a model or pipeline that cannot run here at all (called in its except block;
    such entries are not counted against neuron)."""
    category = NEEDS_PACKAGE if classify(exc) == NEEDS_PACKAGE else CPU_FAILS
    return {"status": "fail", "category": category, "error": first_line(exc),
            "traceback": traceback.format_exc(limit=-6)}


def lowering_op(exc: BaseException) -> str | None:
    """The ATen op of a lowering failure (compile/lowering.py's NeuronLoweringError, possibly wrapped by Dynamo)."""
    for error in (exc, _inner(exc)):
        if error is not None and type(error).__name__ == "NeuronLoweringError":
            return getattr(error, "op", None) or "unknown op"
    return None


def failure_info(exc: BaseException) -> dict:
    """What a failed step records: category, first line of the error, and the op when a graph did not lower."""
    info = {"category": classify(exc), "error": first_line(exc)}
    if info["category"] == LOWERING:
        info["op"] = lowering_op(exc)
    return info


def classify(exc: BaseException) -> str:
    """The category of an exception raised by a neuron step.

    The exception's type decides first: Dynamo's graph-break error is a graph break and a kernel's
    NotImplementedError a missing op whatever words their messages hold (a guard named in a graph break
    is no recompile, a dtype named by a missing kernel is no dtype gap). Only generic types (RuntimeError,
    ValueError, ...) are sorted by their message."""
    if isinstance(exc, ImportError):
        return NEEDS_PACKAGE
    if lowering_op(exc) is not None:
        return LOWERING
    inner = _inner(exc)
    if inner is not None and classify(inner) in (MISSING_OP, DEVICE, DTYPE):
        return classify(inner)  # the backend hit a plugin gap while compiling: that gap is the category
    return _by_type(exc) or _by_message(exc)


def _by_type(exc: BaseException) -> str | None:
    """The category an exception's type names, if it names one."""
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    if name in ("RecompileError", "FailOnRecompileLimitHit"):
        return RECOMPILE
    if module.startswith("torch._dynamo") and name in ("Unsupported", "UncapturedHigherOrderOpError"):
        return GRAPH_BREAK
    if module.startswith("torch._dynamo") or name in ("InvalidBackend", "BackendCompilerFailed"):
        return COMPILE
    if isinstance(exc, NotImplementedError):
        # PyTorch's dispatcher ("Could not run 'aten::x' with arguments from the 'neuron' backend"), a kernel
        # without this dtype ('"histogram_cpu" not implemented for 'Int''), or a kernel refusing a layout
        return MISSING_OP
    return None


def _by_message(exc: BaseException) -> str:
    """The category of a generic exception, from its message."""
    low = str(exc).lower()
    if "could not run" in low and "backend" in low or "not implemented for" in low:
        return MISSING_OP  # the same gaps, raised as another type (a C++ error turned RuntimeError)
    if "recompile" in low and ("limit" in low or "guard" in low):
        return RECOMPILE
    if "graph break" in low:
        return GRAPH_BREAK
    if "torch_neuronx.compile" in low:
        return COMPILE
    if "expected all tensors to be on the same device" in low:
        return DEVICE
    if any(k in low for k in _DTYPE_PHRASES):
        return DTYPE
    return ERROR


# Phrases of a dtype gap (a kernel or rule refusing a dtype), not every message that prints a dtype.
_DTYPE_PHRASES = ("scalar type", "float64", "double", "bfloat16", "fp64", "dtype mismatch", "mismatched dtype",
                  "unsupported dtype", "not supported for dtype", "expected dtype", "same dtype")
