"""neuronxcc.nki.isa (beta 1): each instruction returns a new tile (nc_matmul: a PSUM tile) instead of taking
a destination, takes `mask=` and `dtype=`, and otherwise runs the same instruction semantics (engines.py).

A returned tile assigned into another (`out[...] = nisa.tensor_copy(x)`) or accumulated (`psum += nisa.nc_matmul
(a, b)`) is that instruction writing there: no extra copy is counted and the temporary takes no memory.
"""

from __future__ import annotations

from .. import dtypes as dt
from .. import engines
from ..errors import fail
from ..interpreter import current
from ..isa import (dge_mode, dma_engine, engine, gpsimd_engine, matmul_perf_mode, nc_version,  # noqa: F401
                   oob_mode, reduce_cmd, scalar_engine, tensor_engine, unknown_engine, vector_engine,
                   get_nc_version)
from ..language import _masking
from ..memory import NkiTensor, psum, sbuf
from .indexing import IndexExpr, predicate_values


def _tile(shape, dtype, buffer=sbuf):
    return engines.new_tile(current(), shape, dtype, buffer, temporary=True)


def _free(t: NkiTensor) -> int:
    from ..checks import free_size
    return free_size(t)


def nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              tile_position=(), tile_size=(), mask=None, **kwargs):
    out = _tile((_free(stationary), _free(moving)), stationary.dtype if is_transpose else dt.float32, psum)
    engines.nc_matmul(out, stationary, moving, accumulate=False, is_transpose=is_transpose,
                      tile_position=tile_position, tile_size=tile_size)
    return out


def nc_transpose(data, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    small = data.shape[0] <= 32 and _free(data) <= 32
    eng = engine if engine is not None and getattr(engine, "name", "unknown") != "unknown" else \
        (vector_engine if small else tensor_engine)
    out = _tile((_free(data), data.shape[0]), data.dtype, psum if eng is tensor_engine else sbuf)
    engines.nc_transpose(out, data, eng)
    if dtype is not None and dt.lookup(dtype) != data.dtype:
        return tensor_copy(out, dtype=dtype)
    return out


def activation(op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               mask=None, dtype=None, **kwargs):
    out = _tile(data.shape, dtype or data.dtype)
    (o, d), where = _masking(mask, out, data)
    engines.activation(o, op, d, bias, scale, reduce_op, reduce_res, reduce_cmd, where=where)
    return out


def activation_reduce(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None, **kwargs):
    out = _tile(data.shape, dtype or data.dtype)
    engines.activation_reduce(out, op, data, reduce_op, reduce_res, bias, scale)
    return out


def tensor_tensor(data1, data2, op, *, dtype=None, mask=None, engine=engine.unknown, **kwargs):
    out = _tile(data1.shape, dtype or dt.promote(data1.dtype, data2.dtype))
    (o, a, b), where = _masking(mask, out, data1, data2)
    engines.tensor_tensor(o, a, b, op, engine, where=where)
    return out


def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, *, dtype=None,
                  mask=None, engine=engine.unknown, **kwargs):
    out = _tile(data.shape, dtype or data.dtype)
    (o, d), where = _masking(mask, out, data)
    engines.tensor_scalar(o, d, op0, operand0, reverse0, op1, operand1, reverse1, engine, where=where)
    return out


def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None,
                         mask=None, **kwargs):
    out = _tile(data.shape, dtype or dt.promote(data.dtype, operand1.dtype))
    engines.scalar_tensor_tensor(out, data, op0, operand0, op1, operand1, reverse0, reverse1)
    return out


def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None,
                         **kwargs):
    out = _tile(data.shape, dtype or data.dtype)
    engines.tensor_scalar_reduce(out, data, op0, operand0, reduce_op, reduce_res, reverse0)
    return out


def tensor_reduce(op, data, axis, *, mask=None, dtype=None, negate=False, keepdims=False, **kwargs):
    axes = engines._axes(axis, data.ndim, "tensor_reduce", data)
    shape = [1 if a in axes else s for a, s in enumerate(data.shape)] if keepdims else \
        [s for a, s in enumerate(data.shape) if a not in axes]
    out = _tile(tuple(shape), dtype or data.dtype)
    (d,), _ = _masking(mask, data)
    engines.tensor_reduce(out, op, d, axes, negate, keepdims)
    return out


def tensor_copy(src, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    out = _tile(src.shape, dtype or src.dtype)
    (o, s), where = _masking(mask, out, src)
    engines.tensor_copy(o, s, engine, where=where)
    return out


def tensor_copy_predicated(*, src, dst, predicate, reverse_pred=False, mask=None, dtype=None, **kwargs):
    engines.tensor_copy_predicated(dst, src, predicate, reverse_pred)
    return dst


def memset(shape, value, dtype, *, mask=None, engine=engine.unknown, **kwargs):
    out = _tile(shape, dtype)
    (o,), where = _masking(mask, out)
    engines.memset(o, value, engine, where=where)
    return out


def reciprocal(data, *, dtype=None, mask=None, **kwargs):
    out = _tile(data.shape, dtype or data.dtype)
    engines.reciprocal(out, data)
    return out


def bn_stats(data, *, mask=None, dtype=None, **kwargs):
    out = _tile((data.shape[0], 6), dtype or data.dtype)
    engines.bn_stats(out, data)
    return out


def bn_aggr(data, *, mask=None, dtype=None, **kwargs):
    out = _tile((data.shape[0], 2), dtype or data.dtype)
    engines.bn_aggr(out, data)
    return out


def iota(expr, dtype, *, mask=None, **kwargs):
    """The values of an nl.arange affine expression, generated on GpSimd into a new SBUF tile."""
    if not isinstance(expr, IndexExpr):
        fail("err_iota_expr", f"nisa.iota needs an nl.arange / nl.mgrid expression, got {expr!r}",
             "pass an affine expression of nl.arange indices (beta 1) or use nki.isa.iota (NKI 0.3+)")
    v = expr.values
    shape = tuple(v.shape) if v.dim() >= 2 else (v.shape[0], 1)
    run = current()
    out = _tile(shape, dtype)
    from .. import cost
    run.issue("GpSimd", cost.stream_seconds(run.gen, "GpSimd", _free(out), 0, out.dtype), writes=(out,))
    values = v.reshape(shape).to(run.device)
    engines.write(out, values.float() if out.dtype.is_float else values)
    return out


def affine_select(pred, on_true_tile, on_false_value, *, mask=None, dtype=None, **kwargs):
    """on_true_tile where the affine predicate holds, on_false_value elsewhere (GpSimd). Beta 1 documents no memory
    rule for on_true_tile and its flash attention passes PSUM scores (NKI 0.3+ requires SBUF)."""
    import torch
    from .. import checks, cost
    run = current()
    checks.memory("affine_select", "on_true_tile", on_true_tile, (sbuf, psum))
    out = _tile(on_true_tile.shape, dtype or on_true_tile.dtype)
    p = predicate_values(pred, on_true_tile.shape).to(run.device)
    x = engines.read(on_true_tile)
    run.issue("GpSimd", cost.stream_seconds(run.gen, "GpSimd", _free(out), 1, out.dtype), reads=(on_true_tile,),
              writes=(out,))
    engines.write(out, torch.where(p, x, torch.full((), float(on_false_value), device=x.device)))
    return out


def dma_copy(*, dst, src, mask=None, dst_rmw_op=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown, **kwargs):
    if dst_rmw_op is not None:
        raise NotImplementedError("nisa.dma_copy(dst_rmw_op=...) (read-modify-write DMA) is not emulated here")
    (d, s), where = _masking(mask, dst, src)
    engines.dma_copy(d, s, dge_mode=dge_mode, oob_mode=oob_mode, where=where)


def dma_transpose(src, *, axes=None, mask=None, dtype=None, **kwargs):
    from .. import isa
    axes = tuple(axes) if axes is not None else tuple(reversed(range(src.ndim)))
    out = _tile(tuple(src.shape[a] for a in axes), dtype or src.dtype)
    isa.dma_transpose(out, src, axes)
    return out


def _unsupported(name):
    def f(*args, **kwargs):
        raise NotImplementedError(f"neuronxcc.nki.isa.{name} is not emulated here (docs/nki.md lists what runs)")
    f.__name__ = name
    return f


for _name in ("builtin_custom_op", "dropout", "local_gather", "max8", "nc_find_index8", "nc_match_replace8",
              "nc_stream_shuffle", "range_select", "select_reduce", "sequence_bounds", "tensor_copy_dynamic_dst",
              "tensor_copy_dynamic_src", "tensor_partition_reduce", "tensor_tensor_scan"):
    globals()[_name] = _unsupported(_name)
