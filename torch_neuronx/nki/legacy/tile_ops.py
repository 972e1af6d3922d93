"""Beta 1's tile operators: `a + b`, `x * 2`, `-x`, `a > b`, `psum += nl.matmul(...)`.

NKI 0.3+ tensors have no arithmetic operators (its frontend: "binary operators on tensors not supported.
Use nki.isa directly."), so in an `@nki.jit` kernel they raise.
"""

from __future__ import annotations

from .. import engines
from .. import language as nl
from ..errors import fail
from ..interpreter import current
from ..memory import NkiTensor, psum


def _legacy(op: str):
    run = current()
    if not run.legacy:
        fail("err_tensor_operator", f"binary operators on tensors not supported. Use nki.isa directly. "
             f"(`{op}` on NKI 0.3+ tensors)",
             "call nisa.tensor_tensor / nisa.tensor_scalar (or nl.add, nl.multiply, ...)"
             "; beta-1 kernels with tile operators run under neuronxcc.nki.jit")
    return run


def binary(name: str, a: NkiTensor, b, reverse: bool = False):
    _legacy(name)
    fn = getattr(nl, name)
    return fn(b, a) if reverse else fn(a, b)


def unary(name: str, a: NkiTensor):
    _legacy(name)
    return getattr(nl, name)(a)


def accumulate(dst: NkiTensor, value, op: str):
    """`dst += value`: a matmul result accumulates into PSUM (TensorE's read-add-write); otherwise
    dst[...] = dst op value."""
    run = _legacy(op + "=")
    if (op == "add" and dst.buffer is psum and isinstance(value, NkiTensor) and value.buffer is psum
            and value._alloc.temporary):
        run.issue_free(writes=(dst,), accumulate=True)
        engines.psum_accumulate(run, dst, engines.read(value), None, True, "+=")
        return dst
    engines.assign(dst, getattr(nl, op)(dst, value, dtype=dst.dtype))
    return dst
