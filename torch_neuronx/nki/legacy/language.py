"""neuronxcc.nki.language (beta 1): nki.language plus arange / mgrid indices, par_dim, SPMD grid helpers and
affine_range's parallel iterations.

In beta 1, `nl.affine_range` iterations may run in parallel: each must write its own locations of every
tensor made outside the loop (err_unexpected_output_dependencies, checked: interpreter.Run._affine_write);
`nl.sequential_range` and Python's `range` allow loop-carried dependencies.
"""

from __future__ import annotations

from ..checks import par_dim  # noqa: F401
from ..interpreter import loop as _loop
from ..language import *  # noqa: F401,F403
from ..language import __all__ as _current_all
from .indexing import IndexExpr, MaskExpr, arange, mgrid  # noqa: F401


def affine_range(start, stop=None, step=1, **kwargs):
    """Parallel iterations (beta 1): no loop-carried dependency except PSUM matmul accumulation."""
    return _loop("affine", (start, stop, step) if stop is not None else (start,))


class LoopReduce:
    """nl.loop_reduce(x, op, loop_indices): `dst[...] = nl.loop_reduce(...)` makes dst = op(x, dst) (the
    destination is the right operand, beta-1 docs); the assignment issues that VectorE instruction."""

    _nki_pending_assignment = True

    def __init__(self, x, op, dtype, mask):
        self.x, self.op, self.dtype, self.mask = x, op, dtype, mask

    def assign_to(self, dst) -> None:
        from .. import engines
        from ..language import _masking
        (d, x), where = _masking(self.mask, dst, self.x)
        engines.tensor_tensor(d, x, d, self.op, name="loop_reduce", where=where, accumulate=True)


def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None, **kwargs):
    return LoopReduce(x, op, dtype, mask)


def nc(n):
    """nl.nc(n): a logical NeuronCore launch dimension; the grid's programs run one after another here."""
    return int(n)


def spmd_dim(*sizes):
    import math
    return math.prod(int(s) for s in sizes)


__all__ = [n for n in _current_all if n != "loop_reduce"] + [
    "loop_reduce", "affine_range", "arange", "mgrid", "par_dim", "nc", "spmd_dim", "IndexExpr", "MaskExpr"]
