"""What each NeuronCore instruction does to whole tiles: the semantics behind nki.isa (and nki.language).

Every instruction here takes its destination first (NKI 0.3+'s form; beta-1's returning calls allocate the
destination and call these), checks its operands (checks.py), computes on the whole tile with torch's fp32 ops,
rounds once to the destination dtype, writes through the destination's strided view, and charges its engine
(cost.py). Engines compute in fp32: inputs are widened exactly, results rounded once (RNE); TensorE
multiplies in fp32 and accumulates in fp32 PSUM; DMA converts between dtypes through fp32.

PSUM accumulation (nc_matmul `accumulate=None`, NKI's default: "first write overwrites, subsequent writes
accumulate"): each PSUM element remembers how it was last written (never / by a matmul / by another engine)
and whether it was read since. A matmul accumulates onto elements a matmul wrote and nobody read since (the
current accumulation group) and overwrites the rest. `accumulate=True` onto memory no matmul wrote is undefined
on hardware: it raises here.
"""

from __future__ import annotations

import math

import torch

from . import checks
from . import cost
from . import dtypes as dt
from . import operators as ops
from .errors import fail
from .interpreter import current
from .memory import HBM, NkiTensor, ON_CHIP, psum, sbuf

# PSUM element states: how each element was last written, and whether it was read since
NEVER, MATMUL, OTHER, MATMUL_READ = 0, 1, 2, 3


def _psum_states(t: NkiTensor) -> torch.Tensor:
    """The per-element states under view `t` (materialized from the allocation's uniform state if needed)."""
    a = t._alloc
    if a.psum_state is None:
        a.psum_state = torch.full((a.flat.numel(),), a.psum_uniform, dtype=torch.int8)
        a.psum_uniform = None
    return a.psum_state.as_strided(t.shape, t.strides, t.offset)


def psum_mark(t: NkiTensor, state: int, where: torch.Tensor | None = None) -> None:
    if where is None and t.covers_allocation():
        t._alloc.psum_state, t._alloc.psum_uniform = None, state
        return
    s = _psum_states(t)
    if where is None:
        s.fill_(state)
    else:
        s.masked_fill_(where.to(s.device).expand(s.shape), state)


def psum_read(t: NkiTensor) -> None:
    """A read of PSUM ends the current accumulation group of the elements it reads."""
    a = t._alloc
    if a.psum_uniform is not None:
        if a.psum_uniform != MATMUL:
            return
        if t.covers_allocation():
            a.psum_uniform = MATMUL_READ
            return
    s = _psum_states(t)
    s.masked_fill_(s == MATMUL, MATMUL_READ)


def psum_state_of(t: NkiTensor):
    """The state of every element under `t` if they agree (an int), else the per-element tensor."""
    a = t._alloc
    if a.psum_uniform is not None:
        return a.psum_uniform
    s = _psum_states(t)
    first = int(s.reshape(-1)[0]) if s.numel() else NEVER
    return first if bool((s == first).all()) else s


def read(t: NkiTensor) -> torch.Tensor:
    """A tile as the engines see it: fp32 (integers exact up to 2^24, as on the hardware)."""
    if t.buffer is psum:
        psum_read(t)
    return dt.to_compute(t.data)


def write(dst: NkiTensor, value: torch.Tensor, where: torch.Tensor | None = None, state: int = OTHER) -> None:
    """Store a computed tile into `dst`: one rounding to dst.dtype, through dst's view (optionally only `where`)."""
    v = dt.round_to(value, dst.dtype)
    if tuple(v.shape) != dst.shape:
        v = v.reshape(dst.shape)
    d = dst.data
    if where is not None:
        where = where.to(d.device)
        v = torch.where(where, v, d)
    d.copy_(v)
    if dst.buffer is psum:
        psum_mark(dst, state, where)


def _partition_shaped(value: torch.Tensor, dst: NkiTensor) -> torch.Tensor:
    return value.reshape(dst.shape) if tuple(value.shape) != dst.shape else value


def scalar_or_vector(x, parts: int) -> torch.Tensor | float:
    """A scale / bias / scalar operand: a Python number, or a [P, 1] tile broadcast along the free axes."""
    if isinstance(x, NkiTensor):
        v = read(x).reshape(x.shape[0], 1)
        return v
    return float(x)


def _bcast(v, ndim: int):
    if isinstance(v, torch.Tensor) and v.dim() < ndim:
        return v.reshape(v.shape + (1,) * (ndim - v.dim()))
    return v


def _engine(engine, default: str) -> str:
    name = getattr(engine, "name", None) or (engine if isinstance(engine, str) else None)
    return {"tensor": "TensorE", "vector": "VectorE", "scalar": "ScalarE", "gpsimd": "GpSimd",
            "dma": "DMA", "sync": "DMA"}.get(name, default) if name not in (None, "unknown") else default


def _stream(run, engine: str, t: NkiTensor, inputs: int = 1) -> float:
    return cost.stream_seconds(run.gen, engine, checks.free_size(t), inputs, t.dtype)


def _on_chip_operands(run, op: str, engine: str, named: dict) -> None:
    for name, t in named.items():
        if t is None:
            continue
        checks.memory(op, name, t, ON_CHIP)
        checks.tile(op, name, t, run.gen)
        checks.engine_free_size(op, name, t, run.gen)
        if t.buffer is psum:
            checks.psum_bank(run, op, t)
        if engine == "GpSimd" and t.buffer is psum:
            fail("err_unsupported_memory", f"Expected operand '{name}' of '{op}' to be in address space 'sbuf', but "
                 "got a tile in 'psum' instead (GpSimd cannot access PSUM).",
                 "run it on VectorE/ScalarE (engine=nisa.vector_engine), or copy the tile to SBUF first")


# -- data movement ------------------------------------------------------------------------------------------

def dma_copy(dst: NkiTensor, src, *, op="dma_copy", dge_mode=None, oob_mode=None, where=None,
             allow_psum: bool = False) -> None:
    run = current()
    allowed = (sbuf, psum, *HBM) if allow_psum else (sbuf, *HBM)
    if isinstance(src, NkiTensor):
        checks.memory(op, "src", src, allowed)
    checks.memory(op, "dst", dst, allowed if allow_psum else (sbuf, *HBM))
    if not isinstance(src, NkiTensor):
        value = torch.full(dst.shape, float(src), dtype=torch.float32, device=run.device)
        nbytes = dst.size * dst.dtype.itemsize
    else:
        if src.size != dst.size:
            fail("err_dma_shape_mismatch",
                 f"DMA Copy in/out shape must match: '{op}' copies {src.size} elements of {src.describe()} into "
                 f"{dst.size} of {dst.describe()}", "slice src and dst to the same number of elements")
        if getattr(dge_mode, "name", None) == "hwdge" and src.dtype != dst.dtype:
            fail("err_dma_dtype", f"'{op}' with dge_mode=hwdge cannot convert {src.dtype} to {dst.dtype}",
                 "use the same dtype on both sides (reinterpret with .view(dtype)) or let the compiler pick the DGE")
        if src.buffer is psum:  # beta 1 allowed storing PSUM tiles: the compiler inserted a copy
            run.issue("ScalarE", _stream(run, "ScalarE", src), reads=(src,))
        value = _dma_read(src, run, oob_mode)
        nbytes = max(src.size * src.dtype.itemsize, dst.size * dst.dtype.itemsize)
    on_chip = dst if dst.buffer in ON_CHIP else (src if isinstance(src, NkiTensor) and src.buffer in ON_CHIP else None)
    parts = on_chip.shape[0] if on_chip is not None and on_chip.shape else 128
    reads = (src,) if isinstance(src, NkiTensor) else ()
    run.issue("DMA", cost.dma_seconds(run.gen, nbytes, parts), reads=reads, writes=(dst,))
    run.cost.dma_bytes += nbytes
    if dst._indirect is not None:
        _dma_scatter(dst, value, run, oob_mode)
    else:
        same = isinstance(src, NkiTensor) and src.dtype == dst.dtype and src._indirect is None
        if same and where is None:  # bit-exact copy
            dst.data.copy_(src.data.reshape(dst.shape) if src.shape != dst.shape else src.data)
            if dst.buffer is psum:
                psum_mark(dst, OTHER)
        else:
            write(dst, value.reshape(dst.shape), where)


def _indirect_addresses(t: NkiTensor, run, oob_mode):
    dim, index_tile, _ = t._indirect
    strides = list(t.strides)
    stride = strides[dim]
    strides[dim] = 0
    limit = t._alloc.flat.numel()
    base = torch.arange(limit, dtype=torch.int64).as_strided(t.shape, strides, t.offset) if limit else None
    idx = dt.to_compute(index_tile.data).to(torch.int64).reshape(-1)
    if idx.device.type == "meta" or base is None:
        return None, None
    n = t.shape[dim]
    if idx.numel() < n:
        fail("err_indirect_index_shape", f"vector_offset {index_tile.describe()} has {idx.numel()} indices, "
             f"the access needs {n}")
    shape = [1] * len(t.shape)
    shape[dim] = n
    addr = base + (idx[:n] * stride).reshape(shape)
    valid = (addr >= 0) & (addr < limit)
    skip = getattr(oob_mode, "name", None) == "skip"
    if not skip and not bool(valid.all()):
        fail("err_dma_out_of_bound",
             f"failed to run scatter/gather (indirect memory copy via vector DGE), due to out-of-bound access: "
             f"an index of {index_tile.describe()} points outside {t._alloc.describe()}",
             "clamp the indices, or pass oob_mode=nisa.oob_mode.skip to skip out-of-range rows")
    return addr, valid


def _dma_read(src: NkiTensor, run, oob_mode) -> torch.Tensor:
    if src._indirect is None:
        return dt.to_compute(src.data) if src.buffer is not psum else read(src)
    checks.memory("dma_copy", "vector_offset", src._indirect[1], (sbuf,))
    addr, valid = _indirect_addresses(src, run, oob_mode)
    flat = src._alloc.flat_as(src.dtype.storage)
    if addr is None:
        return torch.empty(src.shape, dtype=torch.float32, device=flat.device)
    vals = dt.to_compute(flat[addr.clamp(0, max(flat.numel() - 1, 0))])
    return torch.where(valid, vals, torch.zeros((), dtype=vals.dtype))


def _dma_scatter(dst: NkiTensor, value: torch.Tensor, run, oob_mode) -> None:
    checks.memory("dma_copy", "vector_offset", dst._indirect[1], (sbuf,))
    addr, valid = _indirect_addresses(dst, run, oob_mode)
    if addr is None:
        return
    flat = dst._alloc.flat_as(dst.dtype.storage)
    v = dt.round_to(value.reshape(dst.shape), dst.dtype)
    flat[addr[valid]] = v[valid]


def tensor_copy(dst: NkiTensor, src: NkiTensor, engine=None, *, op="tensor_copy", where=None) -> None:
    run = current()
    eng = _engine(engine, "VectorE")
    _on_chip_operands(run, op, eng, {"dst": dst, "src": src})
    checks.same_partitions(op, ("dst", "src"), (dst, src))
    checks.same_free_elements(op, ("dst", "src"), (dst, src))
    if eng == "ScalarE" and run.gen.version == 2:
        fail("err_unsupported_engine", "tensor_copy is not supported on the Scalar Engine of NeuronCore-v2",
             "use nisa.activation(op=nl.copy, ...) or engine=nisa.vector_engine")
    run.issue(eng, _stream(run, eng, src), reads=(src,), writes=(dst,))
    if src.dtype == dst.dtype and eng != "ScalarE" and where is None:  # bit-accurate copy
        if src.buffer is psum:
            read(src)
        dst.data.copy_(src.data.reshape(dst.shape) if src.shape != dst.shape else src.data)
        if dst.buffer is psum:
            psum_mark(dst, OTHER)
    else:
        write(dst, read(src), where)


def memset(dst: NkiTensor, value, engine=None, *, op="memset", where=None) -> None:
    run = current()
    eng = _engine(engine, "VectorE")
    _on_chip_operands(run, op, eng, {"dst": dst})
    run.issue(eng, _stream(run, eng, dst, 0), writes=(dst,))
    write(dst, torch.full(dst.shape, float(value), dtype=torch.float32, device=run.device), where)


def assign(dst: NkiTensor, value) -> None:
    """`dst[...] = value` (beta 1; NKI 0.3+ NkiTensor.__setitem__): a copy of a tile or a fill with a number.

    The result of a beta-1 instruction assigned to a tile is that instruction writing there: no copy is issued.
    """
    run = current()
    if getattr(value, "_nki_pending_assignment", False):   # beta 1's nl.loop_reduce
        value.assign_to(dst)
        return
    if not isinstance(value, NkiTensor):
        if dst.buffer in HBM:
            dma_copy(dst, value, op="store")
        else:
            memset(dst, value, op="assign")
        return
    if value.shape != dst.shape:
        vs, ds_ = value.shape, dst.shape
        if len(vs) == len(ds_) and all(a == b or a == 1 for a, b in zip(vs, ds_)) and vs[0] == ds_[0]:
            value = broadcast_free(value, ds_)
        elif value.size > dst.size:
            fail("err_store_dst_shape_smaller_than_other_shape",
                 f"Illegal assignment destination shape in 'a = b': shape [{', '.join(map(str, ds_))}] of "
                 f"parameter 'a' "
                 f"is smaller than other parameter shapes b[{', '.join(map(str, vs))}].",
                 "assign to a destination of the value's shape (or reduce the value first)")
    if value._alloc.temporary and value.buffer in ON_CHIP and dst.buffer in ON_CHIP:
        state = MATMUL if value.buffer is psum and dst.buffer is psum else OTHER
        run.issue_free(writes=(dst,))
        write(dst, dt.to_compute(value.data) if value.size == dst.size else value.data.float(), state=state)
        return
    if dst.buffer in HBM or value.buffer in HBM:
        dma_copy(dst, value, op="store" if dst.buffer in HBM else "load", allow_psum=run.legacy)
    else:
        tensor_copy(dst, value, op="assign")


def broadcast_free(t: NkiTensor, shape) -> NkiTensor:
    strides = [0 if s == 1 and n != 1 else st for s, n, st in zip(t.shape, shape, t.strides)]
    return NkiTensor(t._alloc, shape, strides, t.offset, t.pdim, t.dtype)


def broadcast_to(t: NkiTensor, shape) -> NkiTensor:
    """t.broadcast_to(shape): partition and free broadcast of a [1, F] / [P, 1] tile (a copy on VectorE)."""
    run = current()
    shape = tuple(int(s) for s in shape)
    if len(shape) != len(t.shape) or any(a != b and a != 1 for a, b in zip(t.shape, shape)):
        fail("err_broadcast_shape", f"cannot broadcast {t.describe()} to {list(shape)}",
             "only size-1 dimensions broadcast")
    out = new_tile(run, shape, t.dtype, sbuf)
    src = broadcast_free(t, shape)
    run.issue("VectorE", cost.stream_seconds(run.gen, "VectorE", checks.free_size(out), 1, t.dtype),
              reads=(t,), writes=(out,))
    write(out, dt.to_compute(src.data))
    return out


def new_tile(run, shape, dtype, buffer, temporary: bool = False) -> NkiTensor:
    from .memory import new_allocation
    t = new_allocation(run, shape, dtype, buffer)
    t._alloc.temporary = temporary and run.legacy
    return t


# -- TensorE ---------------------------------------------------------------------------------------------------

def nc_matmul(dst: NkiTensor, stationary: NkiTensor, moving: NkiTensor, accumulate=None, is_transpose=False,
              tile_position=(), tile_size=(), perf_mode=None, *, op="nc_matmul", legacy_accumulate=False) -> None:
    run = current()
    if getattr(perf_mode, "value", perf_mode) not in (None, "none"):
        raise NotImplementedError("nc_matmul perf_mode=double_row (FP8 double-row packing) is not emulated here "
                                  "(docs/nki.md)")
    stationary, moving = _legacy_sbuf(run, stationary), _legacy_sbuf(run, moving)
    checks.matmul(run, dst, stationary, moving, bool(is_transpose), tuple(tile_size or ()))
    k = stationary.shape[0]
    s = read(stationary).reshape(k, -1)
    if is_transpose:
        result = s.t()
    else:
        m = read(moving).reshape(k, -1)
        result = s.t() @ m
    fp32_in = stationary.dtype in (dt.float32, dt.tfloat32) or moving.dtype in (dt.float32, dt.tfloat32)
    n = checks.free_size(moving)
    run.issue("TensorE", cost.matmul_seconds(run.gen, n, fp32_in), reads=(stationary, moving), writes=(dst,),
              accumulate=legacy_accumulate or accumulate is not False)
    psum_accumulate(run, dst, result, accumulate, legacy_accumulate, op)


def _legacy_sbuf(run, t: NkiTensor) -> NkiTensor:
    """Beta 1 returned instruction results as tiles wherever the next use needed them: a TensorE result (PSUM)
    fed to TensorE again got a copy to SBUF from the compiler (counted here as that copy)."""
    if not (run.legacy and t.buffer is psum and t._alloc.temporary):
        return t
    s = new_tile(run, t.shape, t.dtype, sbuf, temporary=True)
    tensor_copy(s, t, op="copy")
    return s


def psum_accumulate(run, dst: NkiTensor, result: torch.Tensor, accumulate, legacy: bool, op: str) -> None:
    """TensorE's read-add-write into PSUM: overwrite or accumulate per element (see the module docstring)."""
    d = dst.data
    result = result.reshape(dst.shape)
    state = psum_state_of(dst)
    uniform = isinstance(state, int)

    def any_of(v):
        return (state == v) if uniform else bool((state == v).any())

    if legacy:  # beta 1's `psum += ...`: the first write of an accumulation overwrites (fresh PSUM is garbage)
        acc = state != NEVER
    elif accumulate is None:
        acc = state == MATMUL
    elif accumulate:
        if any_of(NEVER):
            fail("err_matmul_accumulate_uninitialized",
                 f"'{op}' with accumulate=True onto {dst.describe()}, which no matmul has written: undefined "
                 "behavior on every NeuronCore", "start the accumulation with accumulate=False (or leave "
                 "accumulate=None)")
        if run.gen.version < 4 and any_of(OTHER):
            fail("err_matmul_accumulate_non_matmul",
                 f"'{op}' accumulates onto PSUM {dst.describe()} last written by a non-matmul instruction (memset, "
                 f"tensor_copy, ...): undefined behavior on {run.gen.name}",
                 "start the accumulation with a matmul (accumulate=False) instead of initializing PSUM")
        acc = True
    else:
        acc = False
    if isinstance(acc, torch.Tensor):
        if bool(acc.all()):
            acc = True
        elif not bool(acc.any()):
            acc = False
    if acc is True:
        value = dt.to_compute(d) + result
    elif acc is False:
        value = result
    else:
        value = torch.where(acc.to(d.device), dt.to_compute(d) + result, result)
    write(dst, value, state=MATMUL)


def nc_transpose(dst: NkiTensor, data: NkiTensor, engine=None, *, op="nc_transpose") -> None:
    run = current()
    eng = _engine(engine, "TensorE" if dst.buffer is psum and data.buffer is sbuf else "VectorE")
    if eng not in ("TensorE", "VectorE"):
        fail("err_unsupported_engine", f"'{op}' runs on the Tensor or Vector engine, not {eng}")
    checks.transpose(run, op, eng, dst, data)
    if eng == "VectorE":
        _on_chip_operands(run, op, eng, {"dst": dst, "data": data})
    p = data.shape[0]
    value = read(data).reshape(p, -1).t()
    if eng == "TensorE":
        seconds = cost.matmul_seconds(run.gen, p, data.dtype in (dt.float32, dt.tfloat32))
    else:
        seconds = _stream(run, "VectorE", data)
    run.issue(eng, seconds, reads=(data,), writes=(dst,))
    write(dst, value, state=MATMUL if eng == "TensorE" else OTHER)


# -- VectorE / GpSimd --------------------------------------------------------------------------------------------

def _all_int(*tiles) -> bool:
    return all(isinstance(t, NkiTensor) and t.dtype in (dt.int32, dt.uint32) for t in tiles)


def tensor_tensor(dst: NkiTensor, data1: NkiTensor, data2: NkiTensor, op, engine=None, *, name="tensor_tensor",
                  where=None, accumulate: bool = False) -> None:
    run = current()
    opname, fn = ops.binary(op)
    exact_int = _all_int(data1, data2) and dst.dtype in (dt.int32, dt.uint32)
    eng = _engine(engine, "GpSimd" if (opname == "power" or exact_int) else "VectorE")
    _on_chip_operands(run, name, eng, {"dst": dst, "data1": data1, "data2": data2})
    checks.same_partitions(name, ("data1", "data2", "dst"), (data1, data2, dst))
    checks.same_free_elements(name, ("data1", "data2", "dst"), (data1, data2, dst))
    if data1.buffer is psum and data2.buffer is psum:
        fail("err_unsupported_memory", f"'{name}': data1 and data2 cannot both be in PSUM",
             "copy one of them to SBUF first (nisa.tensor_copy)")
    if exact_int:
        a, b = data1.data.to(torch.int64), data2.data.to(torch.int64).reshape(data1.shape)
        value = fn(a, b) if opname not in ("divide",) else torch.div(a, b, rounding_mode="floor")
    else:
        a, b = read(data1), read(data2).reshape(data1.shape)
        value = fn(a, b)
    run.issue(eng, _stream(run, eng, data1, 2), reads=(data1, data2), writes=(dst,), accumulate=accumulate)
    write(dst, _partition_shaped(value, dst), where)


def _apply_scalar(fn, x, operand, reverse):
    return fn(operand, x) if reverse else fn(x, operand)


def _scalar_operand(v, parts, x):
    if isinstance(v, torch.Tensor):
        return _bcast(v, x.dim())
    return torch.tensor(v, dtype=torch.float32, device=x.device) if x.device.type == "meta" else v


def tensor_scalar(dst: NkiTensor, data: NkiTensor, op0, operand0, reverse0=False, op1=None, operand1=None,
                  reverse1=False, engine=None, *, name="tensor_scalar", where=None) -> None:
    run = current()
    eng = _engine(engine, "VectorE")
    _on_chip_operands(run, name, eng, {"dst": dst, "data": data})
    checks.same_partitions(name, ("data", "dst"), (data, dst))
    checks.same_free_elements(name, ("data", "dst"), (data, dst))
    p = data.shape[0]
    for n, v in (("operand0", operand0), ("operand1", operand1)):
        checks.vector_operand(name, n, v, p)
    _, f0 = ops.binary(op0, "op0")
    x = read(data)
    reads = [data] + [v for v in (operand0, operand1) if isinstance(v, NkiTensor)]
    x = _apply_scalar(f0, x, _scalar_operand(scalar_or_vector(operand0, p), p, x), reverse0)
    if op1 is not None and ops.name_of(op1) != "bypass":
        _, f1 = ops.binary(op1, "op1")
        x = _apply_scalar(f1, x, _scalar_operand(scalar_or_vector(operand1, p), p, x), reverse1)
    run.issue(eng, _stream(run, eng, data), reads=tuple(reads), writes=(dst,))
    write(dst, _partition_shaped(x, dst), where)


def scalar_tensor_tensor(dst: NkiTensor, data: NkiTensor, op0, operand0, op1, operand1: NkiTensor,
                         reverse0=False, reverse1=False, *, name="scalar_tensor_tensor") -> None:
    """dst = (data op0 operand0) op1 operand1: operand0 a scalar or [P, 1], operand1 a tile like data."""
    run = current()
    _on_chip_operands(run, name, "VectorE", {"dst": dst, "data": data, "operand1": operand1})
    checks.same_partitions(name, ("data", "operand1", "dst"), (data, operand1, dst))
    checks.same_free_elements(name, ("data", "operand1", "dst"), (data, operand1, dst))
    p = data.shape[0]
    checks.vector_operand(name, "operand0", operand0, p)
    _, f0 = ops.binary(op0, "op0")
    _, f1 = ops.binary(op1, "op1")
    x = read(data)
    x = _apply_scalar(f0, x, _scalar_operand(scalar_or_vector(operand0, p), p, x), reverse0)
    y = read(operand1).reshape(x.shape)
    x = f1(y, x) if reverse1 else f1(x, y)
    reads = (data, operand1) + ((operand0,) if isinstance(operand0, NkiTensor) else ())
    run.issue("VectorE", _stream(run, "VectorE", data, 2), reads=reads, writes=(dst,))
    write(dst, _partition_shaped(x, dst))


def _axes(axis, ndim: int, op: str, data: NkiTensor) -> tuple:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(int(a) % ndim for a in axes)
    if 0 in axes:
        fail("err_reduce_partition_axis", f"'{op}' of {data.describe()} reduces along the partition axis 0: engines "
             "reduce along free axes only", "transpose first (nisa.nc_transpose) or use nisa.tensor_partition_reduce")
    return axes


def tensor_reduce(dst: NkiTensor, op, data: NkiTensor, axis, negate=False, keepdims=False, *,
                  name="tensor_reduce", where=None) -> None:
    run = current()
    _on_chip_operands(run, name, "VectorE", {"dst": dst, "data": data})
    checks.same_partitions(name, ("data", "dst"), (data, dst))
    _, fn = ops.reduction(op)
    axes = _axes(axis, data.ndim, name, data)
    x = read(data)
    value = fn(x, list(axes), True)
    if negate:
        value = -value
    if value.numel() != dst.size:
        fail("err_reduce_shape", f"'{name}' of {data.describe()} over axes {list(axes)} gives "
             f"{list(value.shape)}, dst is {dst.describe()}", "size dst to the reduced shape (keep the partition dim)")
    run.issue("VectorE", _stream(run, "VectorE", data), reads=(data,), writes=(dst,))
    write(dst, value.reshape(dst.shape), where)


_REDUCE_IDENTITY = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": float("-inf"), "minimum": float("inf")}


def tensor_scalar_reduce(dst: NkiTensor, data: NkiTensor, op0, operand0, reduce_op, reduce_res=None,
                         reverse0=False, reduce_cmd=None, reduce_init=None, reduce_res_negate=False, *,
                         name="tensor_scalar_reduce") -> None:
    """dst = data op0 operand0, and VectorE's accumulator registers reduce it along the free axes into reduce_res."""
    run = current()
    _on_chip_operands(run, name, "VectorE", {"dst": dst, "data": data, "reduce_res": reduce_res})
    checks.same_partitions(name, ("data", "dst"), (data, dst))
    checks.same_free_elements(name, ("data", "dst"), (data, dst))
    p = data.shape[0]
    checks.vector_operand(name, "operand0", operand0, p)
    _, f0 = ops.binary(op0, "op0")
    red_name, red = ops.reduction("add" if ops.name_of(reduce_op) == "subtract" else reduce_op, "reduce_op")
    x = read(data)
    x = _apply_scalar(f0, x, _scalar_operand(scalar_or_vector(operand0, p), p, x), reverse0)
    cmd = getattr(reduce_cmd, "name", reduce_cmd) or "reset_reduce"
    regs = run.reduce_regs.get("VectorE")
    if cmd == "reset_reduce" or regs is None or regs.shape[0] != p:
        regs = torch.full((p, 1), _REDUCE_IDENTITY.get(red_name, 0.0), dtype=torch.float32, device=run.device)
    if cmd == "load_reduce":
        regs = _bcast(scalar_or_vector(reduce_init, p), 2) * torch.ones((p, 1), device=run.device)
    part = red(x.reshape(p, -1), [1], True)
    regs = red(torch.cat([regs, part], dim=1), [1], True)
    run.reduce_regs["VectorE"] = regs
    reads = (data,) + ((operand0,) if isinstance(operand0, NkiTensor) else ())
    writes = (dst,) + ((reduce_res,) if reduce_res is not None else ())
    run.issue("VectorE", _stream(run, "VectorE", data), reads=reads, writes=writes)
    write(dst, _partition_shaped(x, dst))
    if reduce_res is not None:
        write(reduce_res, (-regs if reduce_res_negate else regs).reshape(reduce_res.shape))


def reciprocal(dst: NkiTensor, data: NkiTensor, *, name="reciprocal") -> None:
    run = current()
    _on_chip_operands(run, name, "VectorE", {"dst": dst, "data": data})
    checks.same_partitions(name, ("data", "dst"), (data, dst))
    run.issue("VectorE", _stream(run, "VectorE", data), reads=(data,), writes=(dst,))
    write(dst, _partition_shaped(torch.reciprocal(read(data)), dst))


def bn_stats(dst: NkiTensor, data: NkiTensor) -> None:
    """Per partition: (count, mean, variance*count) of the even and of the odd elements (6 values)."""
    run = current()
    _on_chip_operands(run, "bn_stats", "VectorE", {"dst": dst, "data": data})
    checks.same_partitions("bn_stats", ("data", "dst"), (data, dst))
    f = checks.free_size(data)
    if f > run.gen.bn_stats_fmax:
        fail("err_size_of_dimension_exceed_arch_limit",
             f"bn_stats input {data.describe()} has {f} elements per partition; at most "
             f"nl.tile_size.bn_stats_fmax ({run.gen.bn_stats_fmax})",
             "run bn_stats on 512-element chunks into one stats tile, then one bn_aggr over all of them")
    if checks.free_size(dst) != 6:
        fail("err_bn_stats_shape", f"bn_stats writes 6 values per partition, dst is {dst.describe()}",
             "allocate dst as (P, 6) (nl.tile_size.bn_stats_dim)")
    x = read(data).reshape(data.shape[0], -1)
    parts = []
    for half in (x[:, 0::2], x[:, 1::2]):
        n = half.shape[1]
        mean = half.mean(dim=1, keepdim=True) if n else torch.zeros_like(x[:, :1])
        m2 = ((half - mean) ** 2).sum(dim=1, keepdim=True) if n else torch.zeros_like(x[:, :1])
        parts += [torch.full_like(mean, float(n)), mean, m2]
    run.issue("VectorE", _stream(run, "VectorE", data), reads=(data,), writes=(dst,))
    write(dst, torch.cat(parts, dim=1))


def bn_aggr(dst: NkiTensor, data: NkiTensor) -> None:
    """Mean and variance per partition from (count, mean, variance*count) triples (Chan's combination)."""
    run = current()
    _on_chip_operands(run, "bn_aggr", "VectorE", {"dst": dst, "data": data})
    checks.same_partitions("bn_aggr", ("data", "dst"), (data, dst))
    f = checks.free_size(data)
    if f % 3:
        fail("err_bn_aggr_shape", f"bn_aggr input {data.describe()} must hold (count, mean, var*count) triples: "
             f"its {f} elements per partition are not a multiple of 3", "pass the bn_stats outputs")
    if checks.free_size(dst) != 2:
        fail("err_bn_aggr_shape", f"bn_aggr writes (mean, variance) per partition, dst is {dst.describe()}",
             "allocate dst as (P, 2) (nl.tile_size.bn_aggr_dim)")
    t = read(data).reshape(data.shape[0], -1, 3)
    count, mean, m2 = t[..., 0], t[..., 1], t[..., 2]
    total = count.sum(dim=1, keepdim=True)
    safe = torch.where(total > 0, total, torch.ones_like(total))
    mu = (count * mean).sum(dim=1, keepdim=True) / safe
    var = (m2 + count * (mean - mu) ** 2).sum(dim=1, keepdim=True) / safe
    run.issue("VectorE", _stream(run, "VectorE", data), reads=(data,), writes=(dst,))
    write(dst, torch.cat([mu, var], dim=1))


def tensor_copy_predicated(dst: NkiTensor, src, predicate: NkiTensor, reverse_pred=False) -> None:
    run = current()
    _on_chip_operands(run, "tensor_copy_predicated", "VectorE",
                      {"dst": dst, "predicate": predicate, "src": src if isinstance(src, NkiTensor) else None})
    checks.same_free_elements("tensor_copy_predicated", ("dst", "predicate"), (dst, predicate))
    pred = predicate.data.reshape(dst.shape) != 0
    if reverse_pred:
        pred = ~pred
    value = read(src).reshape(dst.shape) if isinstance(src, NkiTensor) else \
        torch.full(dst.shape, float(src), dtype=torch.float32, device=run.device)
    reads = (predicate, src) if isinstance(src, NkiTensor) else (predicate,)
    run.issue("VectorE", _stream(run, "VectorE", dst, 2), reads=reads, writes=(dst,))
    write(dst, value, where=pred)


# -- GpSimd pattern generation ----------------------------------------------------------------------------------

def _pattern_values(run, dst: NkiTensor, pattern, offset, channel_multiplier, op: str) -> torch.Tensor:
    pattern = [(int(s), int(n)) for s, n in pattern]
    count = math.prod(n for _, n in pattern) if pattern else 1
    f = checks.free_size(dst)
    if count != f:
        fail("err_pattern_size", f"'{op}' pattern {[list(p) for p in pattern]} generates {count} values per partition, "
             f"{dst.describe()} has {f}", "make the pattern's counts multiply to the tile's free size")
    v = torch.full((dst.shape[0], 1), int(offset), dtype=torch.int64)
    v = v + torch.arange(dst.shape[0], dtype=torch.int64).reshape(-1, 1) * int(channel_multiplier)
    free = torch.zeros(1, dtype=torch.int64)
    for step, num in pattern:
        free = (free.reshape(-1, 1) + torch.arange(num, dtype=torch.int64).reshape(1, -1) * step).reshape(-1)
    return (v + free.reshape(1, -1)).to(torch.int32)


def iota(dst: NkiTensor, pattern, offset=0, channel_multiplier=0) -> None:
    run = current()
    checks.memory("iota", "dst", dst, (sbuf,))
    checks.tile("iota", "dst", dst, run.gen)
    values = _pattern_values(run, dst, pattern, offset, channel_multiplier, "iota")
    run.issue("GpSimd", _stream(run, "GpSimd", dst, 0), writes=(dst,))
    write(dst, values.to(torch.float32 if dst.dtype.is_float else torch.int64).to(run.device)
          if run.device.type != "meta" else torch.empty(values.shape, device="meta"))


def affine_select(dst: NkiTensor, pattern, channel_multiplier, on_true_tile: NkiTensor, on_false_value,
                  cmp_op=None, offset=0) -> None:
    run = current()
    checks.memory("affine_select", "dst", dst, (sbuf,))
    checks.memory("affine_select", "on_true_tile", on_true_tile, (sbuf,))
    checks.tile("affine_select", "dst", dst, run.gen)
    checks.same_partitions("affine_select", ("on_true_tile", "dst"), (on_true_tile, dst))
    values = _pattern_values(run, dst, pattern, offset, channel_multiplier, "affine_select").to(torch.float32)
    _, cmp = ops.binary(cmp_op if cmp_op is not None else "equal", "cmp_op")
    pred = (cmp(values, torch.zeros((), dtype=torch.float32)) != 0).reshape(dst.shape).to(run.device)
    x = read(on_true_tile).reshape(dst.shape)
    value = torch.where(pred, x, torch.full((), float(on_false_value), dtype=torch.float32, device=x.device))
    run.issue("GpSimd", _stream(run, "GpSimd", dst), reads=(on_true_tile,), writes=(dst,))
    write(dst, value)


# -- ScalarE -------------------------------------------------------------------------------------------------------

def activation(dst: NkiTensor, op, data: NkiTensor, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=None, *, name="activation", where=None) -> None:
    run = current()
    _, fn = ops.unary(op)
    _on_chip_operands(run, name, "ScalarE", {"dst": dst, "data": data, "reduce_res": reduce_res})
    checks.same_partitions(name, ("data", "dst"), (data, dst))
    checks.same_free_elements(name, ("data", "dst"), (data, dst))
    p = data.shape[0]
    checks.vector_operand(name, "scale", scale, p, fp32_only=True)
    checks.vector_operand(name, "bias", bias, p)
    if bias is not None and not isinstance(bias, NkiTensor) and run.gen.version == 2:
        fail("err_activation_bias_scalar_v2", f"'{name}' bias must be a [{p}, 1] vector on NeuronCore-v2 (a scalar "
             "bias needs NeuronCore-v3)", "pass the bias as a [P, 1] tile (nisa.memset a (P, 1) tile to the value)")
    x = read(data)
    s = scalar_or_vector(scale, p)
    if isinstance(s, torch.Tensor) or s != 1.0:
        x = x * _bcast(s, x.dim())
    if bias is not None:
        x = x + _bcast(scalar_or_vector(bias, p), x.dim())
    out = fn(x)
    reads = [data] + [v for v in (scale, bias) if isinstance(v, NkiTensor)]
    run.issue("ScalarE", _stream(run, "ScalarE", data), reads=tuple(reads), writes=(dst,))
    write(dst, _partition_shaped(out, dst), where)
    cmd = getattr(reduce_cmd, "name", reduce_cmd) or "idle"
    if reduce_op is None and reduce_res is None and cmd == "idle":
        return
    if reduce_op is not None and ops.name_of(reduce_op) != "add" and run.gen.version == 2:
        fail("err_activation_reduce_op", f"'{name}' reduce_op must be nl.add on NeuronCore-v2")
    _, red = ops.reduction(reduce_op if reduce_op is not None else "add", "reduce_op")
    regs = run.reduce_regs.get("ScalarE")
    if regs is None or regs.shape[0] != p:
        regs = torch.full((p, 1), float("nan"), dtype=torch.float32, device=run.device)
    if cmd in ("reset", "reset_reduce"):
        regs = torch.zeros((p, 1), dtype=torch.float32, device=run.device)
    if cmd in ("reduce", "reset_reduce"):
        flat = out.reshape(p, -1)
        part = red(flat, [1], True)
        if ops.name_of(reduce_op or "add") == "add":
            regs = regs + part
        else:
            regs = red(torch.cat([regs, part], dim=1), [1], True)
    run.reduce_regs["ScalarE"] = regs
    if reduce_res is not None:
        checks.same_partitions(name, ("data", "reduce_res"), (data, reduce_res))
        run.issue("ScalarE", cost.stream_seconds(run.gen, "ScalarE", 1, 1, reduce_res.dtype), writes=(reduce_res,))
        write(reduce_res, regs.reshape(reduce_res.shape))


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0) -> None:
    activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
               reduce_cmd="reset_reduce", name="activation_reduce")


def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=None, reduce_init=0.0) -> None:
    """exp(src - max_value) with an optional sum (NeuronCore-v4's fused softmax numerator)."""
    run = current()
    if run.gen.version < 4:
        fail("err_unsupported_target", f"nisa.exponential needs NeuronCore-v4; the target is {run.gen.name}",
             "use nisa.activation(op=nl.exp, bias=-max) or target trn3 (NEURON_PLATFORM_TARGET_OVERRIDE=trn3)")
    neg = None
    if isinstance(max_value, NkiTensor):
        neg = new_tile(run, max_value.shape, dt.float32, sbuf)
        tensor_scalar(neg, max_value, "multiply", -1.0)
        bias = neg
    else:
        bias = -float(max_value)
    cmd = reduce_cmd if reduce_cmd is not None else ("reset_reduce" if reduce_res is not None else "idle")
    activation(dst, "exp", src, bias=bias, reduce_op="add" if reduce_res is not None else None,
               reduce_res=reduce_res, reduce_cmd=cmd, name="exponential")
