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


def nc(n):
    """nl.nc(n): a logical NeuronCore launch dimension; the grid's programs run one after another here."""
    return int(n)


def spmd_dim(*sizes):
    import math
    return math.prod(int(s) for s in sizes)


__all__ = list(_current_all) + ["affine_range", "arange", "mgrid", "par_dim", "nc", "spmd_dim", "IndexExpr",
                                "MaskExpr"]
