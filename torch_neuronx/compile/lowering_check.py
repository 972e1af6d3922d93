"""TORCHNEURON_LOWERING=check: the lowered StableHLO, run in the reference interpreter, against the executed graph.

The emulator executes Inductor's host code; what Trainium would execute is the StableHLO the lowering
stage made (lowering.py). This check runs that StableHLO itself, once per compiled graph, on the
inputs of the graph's first call, in StableHLO's reference interpreter (shipped with torch-mlir), and
compares every output with what the executed graph returned. A difference beyond the tolerance of
float32 math is an error naming the graph, the output and the difference: the lowered program would
compute something else than the emulator does.

The interpreter is slow (it interprets every element): for small graphs, in tests and when
investigating a model. float32, complex64 (as float32 pairs), integer and boolean graphs are checked; a
graph with other dtypes (bfloat16, float16) is skipped with a note, as numpy has no such types, and so is a
graph that calls NKI kernels or collectives (custom calls, stand_ins.py: the interpreter cannot run them).
"""

from __future__ import annotations

import logging
import re
from typing import Any, Callable, Sequence

import numpy as np
import torch

from . import stats
from .errors import NeuronCompileError

log = logging.getLogger("torch_neuronx.compile")

# complex64 as the lowering presents it (complex_ops.py): float32 pairs
_CHECKED_DTYPES = {torch.float32, torch.float64, torch.int64, torch.int32, torch.bool, torch.complex64}
RTOL, ATOL = 1e-4, 1e-4


def checked_once(call: Callable[[list[Any]], Sequence[Any]], stablehlo: str, kind: str) -> Callable[[list[Any]], Any]:
    """`call`, whose first call also runs `stablehlo` on the same inputs and compares the results."""
    pending = [True]

    def call_and_check(args: list[Any]) -> Sequence[Any]:
        if not pending:
            return call(args)
        pending.clear()
        inputs = [a.detach().cpu() if isinstance(a, torch.Tensor) else a for a in args]
        outputs = call(args)
        compare(stablehlo, inputs, [o for o in outputs if o is not None], kind)
        return outputs
    return call_and_check


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu()
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.to(torch.float32 if t.dtype == torch.float64 else t.dtype).contiguous().numpy()


# torch-mlir leaves tensor constants of its own scalar arithmetic as `arith.constant`; the interpreter
# runs StableHLO ops only (and aborts the process on any other), so they become stablehlo.constant.
_ARITH_TENSOR_CONSTANT = re.compile(r"= arith\.constant (dense<[^>]*>) : (tensor<[^>]*>)")


# stand_ins.py: NKI kernels and collectives in the lowered program
_CUSTOM_CALL = re.compile(r"stablehlo\.custom_call @([\w.]+)")


class NotInterpretable(Exception):
    pass


def _interpretable_ops(module: Any) -> None:
    """Raise NotInterpretable unless every op of `module` is one the interpreter runs."""
    def walk(op: Any) -> None:
        name = op.operation.name
        if not (name.startswith("stablehlo.") or name in ("func.func", "func.return", "builtin.module")):
            raise NotInterpretable(f"it holds {name}")
        for region in op.operation.regions:
            for block in region:
                for inner in block:
                    walk(inner)
    walk(module.operation)


def run_stablehlo(stablehlo: str, inputs: Sequence[torch.Tensor]) -> list[np.ndarray]:
    """The StableHLO module's results for `inputs`, from the reference interpreter."""
    from torch_mlir import ir
    from torch_mlir._mlir_libs import _stablehlo
    with ir.Context() as context:
        _stablehlo.register_dialect(context)
        module = ir.Module.parse(_ARITH_TENSOR_CONSTANT.sub(r"= stablehlo.constant \1 : \2", stablehlo))
        _interpretable_ops(module)
        args = [ir.DenseElementsAttr.get(_to_numpy(t)) for t in inputs]
        return [np.array(r) for r in _stablehlo.eval_module(module, args)]


def compare(stablehlo: str, inputs: Sequence[Any], executed: Sequence[Any], kind: str) -> dict:
    """Run the lowered graph on `inputs` and compare with the `executed` outputs; raise on a difference."""
    calls = sorted(set(_CUSTOM_CALL.findall(stablehlo)))
    if calls:
        result = {"kind": kind, "checked": False,
                  "why": f"not checked: it calls {', '.join(calls)} (NKI kernels and collectives are custom calls, "
                         f"which the reference interpreter cannot run)"}
        stats.record_lowering_check(result)
        log.info("neuron: lowering check of the %s graph skipped (%s)", kind, result["why"])
        return result
    tensors = [x for x in list(inputs) + list(executed) if isinstance(x, torch.Tensor)]
    if any(not isinstance(x, torch.Tensor) for x in inputs) or any(t.dtype not in _CHECKED_DTYPES for t in tensors):
        others = sorted({str(t.dtype) for t in tensors if t.dtype not in _CHECKED_DTYPES} |
                        ({"non-tensor inputs"} if any(not isinstance(x, torch.Tensor) for x in inputs) else set()))
        result = {"kind": kind, "checked": False, "why": f"not checked: {', '.join(others)}"}
        stats.record_lowering_check(result)
        log.info("neuron: lowering check of the %s graph skipped (%s)", kind, result["why"])
        return result
    try:
        lowered = run_stablehlo(stablehlo, inputs)
    except NotInterpretable as e:
        result = {"kind": kind, "checked": False, "why": f"not interpretable: {e}"}
        stats.record_lowering_check(result)
        log.warning("neuron: lowering check of the %s graph skipped (%s)", kind, result["why"])
        return result
    if len(lowered) != len(executed):
        raise NeuronCompileError(f"lowering check: the lowered {kind} graph returns {len(lowered)} values, the "
                                 f"executed one {len(executed)}")
    worst = 0.0
    for i, (mine, theirs) in enumerate(zip(lowered, executed)):
        expected = _to_numpy(theirs)
        if mine.shape != expected.shape:
            raise NeuronCompileError(f"lowering check: output {i} of the lowered {kind} graph has shape {mine.shape}, "
                                     f"the executed one {expected.shape}")
        if expected.dtype == np.bool_ or np.issubdtype(expected.dtype, np.integer):
            bad = int(np.sum(mine != expected))
            if bad:
                raise NeuronCompileError(f"lowering check: output {i} of the lowered {kind} graph differs from the "
                                         f"executed one in {bad} of {expected.size} elements")
            continue
        diff = np.abs(mine.astype(np.float64) - expected.astype(np.float64))
        finite = np.isfinite(expected)
        if not np.array_equal(np.isfinite(mine), finite) or \
                np.any(diff[finite] > ATOL + RTOL * np.abs(expected[finite].astype(np.float64))):
            raise NeuronCompileError(
                f"lowering check: output {i} of the lowered {kind} graph differs from the executed one: max abs "
                f"difference {float(np.nanmax(diff)) if diff.size else 0.0:.3g} (tolerance {ATOL} + {RTOL} x |value|)")
        worst = max(worst, float(np.max(diff[finite])) if finite.any() else 0.0)
    result = {"kind": kind, "checked": True, "outputs": len(executed), "max_abs_diff": worst}
    stats.record_lowering_check(result)
    return result
