"""nki.language (`import nki.language as nl`): tensors, memories, dtypes, loops, SPMD ids and the
convenience operations that return a new tile (nl.load, nl.add, nl.exp, nl.matmul, ...).

One implementation serves NKI 0.3+ kernels and beta-1 kernels (neuronxcc.nki.language re-exports it and
adds arange/mgrid indices, par_dim and affine_range's parallel-iteration check). The returning operations
take beta 1's optional `mask=` (an affine predicate over nl.arange indices: the instruction runs only where
it holds) and `dtype=`; beta 1 broadcasts a [P, 1] operand along the free axes (NKI 0.3+ documents the
convenience wrappers without broadcasting; broadcasting here is a superset).
"""

from __future__ import annotations

import builtins
import math

import numpy as np
import torch

from . import checks
from . import cost
from . import dtypes as _dt
from . import engines
from . import interpreter
from . import operators as _ops
from . import target as _target
from .dtypes import (  # noqa: F401  (the API's dtypes)
    DType, bfloat16, bool_, float8_e4m3, float8_e4m3fn, float8_e5m2, float8_e8m0fnu, float16, float32, int8, int16,
    int32, tfloat32, uint8, uint16, uint32)
from .errors import fail, user_location
from .memory import (  # noqa: F401  (the API's buffers, views)
    DynamicSlice, MemoryRegion, NkiTensor, ds, hbm, new_allocation, private_hbm, psum, sbuf, shared_hbm)
from .memory import HBM as _HBM, ON_CHIP as _ON_CHIP

float8_e5m2_x4 = "float8_e5m2_x4"
float8_e4m3fn_x4 = "float8_e4m3fn_x4"
float4_e2m1fn_x4 = "float4_e2m1fn_x4"


class NKIObject:
    """Base class of kernel configuration objects (NKI 0.3+)."""

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)


class _FloatConstants:
    def __init__(self, lowest):
        self.min = lowest


fp32 = _FloatConstants(float(np.finfo(np.float32).min))     # beta 1: nl.fp32.min, the most negative fp32
bfp16 = _FloatConstants(float(torch.finfo(torch.bfloat16).min))


def finfo(dtype):
    return torch.finfo(_dt.lookup(dtype).storage)


def is_hbm(buffer) -> bool:
    return buffer in _HBM


def is_on_chip(buffer) -> bool:
    return buffer in _ON_CHIP


def is_psum(buffer) -> bool:
    return buffer is psum


def is_sbuf(buffer) -> bool:
    return buffer is sbuf


# -- tile sizes of the target generation -----------------------------------------------------------------------

class _TileSize:
    """nl.tile_size: the hardware limits of the target NeuronCore (NEURON_PLATFORM_TARGET_OVERRIDE / instance)."""

    @staticmethod
    def _gen():
        run = interpreter.active()
        return run.gen if run is not None else _target.current()

    pmax = property(lambda self: self._gen().pmax)
    psum_fmax = property(lambda self: self._gen().psum_bank_fmax)
    psum_bank_fmax = property(lambda self: self._gen().psum_bank_fmax)
    psum_bank_fmax_bytes = property(lambda self: self._gen().psum_bank_bytes)
    gemm_stationary_fmax = property(lambda self: self._gen().gemm_stationary_fmax)
    gemm_moving_fmax = property(lambda self: self._gen().gemm_moving_fmax(4))   # fp32 dst; v4: 8 banks
    bn_stats_fmax = property(lambda self: self._gen().bn_stats_fmax)
    bn_stats_dim = 6
    bn_aggr_dim = 2
    psum_min_align = 4
    sbuf_min_align = 4
    sbuf_size_bytes = property(lambda self: self._gen().sbuf_bytes)
    sbuf_fmax_bytes = property(lambda self: self._gen().sbuf_partition_bytes)
    sbuf_fmax = property(lambda self: self._gen().sbuf_partition_bytes // 4)
    total_available_sbuf_size = property(lambda self: self._gen().sbuf_partition_bytes)

    @property
    def psum_num_banks(self) -> int:
        import os
        reserved = os.environ.get("NKI_DMA_TRANSPOSE_AS_PE_TRANSPOSE", "").lower() == "true"
        return self._gen().psum_banks - (1 if reserved else 0)


tile_size = _TileSize()


# -- creating tensors ------------------------------------------------------------------------------------------

def ndarray(shape, dtype, buffer=sbuf, name="", address=None, **kwargs):
    run = interpreter.current()
    from .memory import region
    buffer = region(buffer if buffer is not None else sbuf)
    loc = user_location()
    if buffer is shared_hbm:
        return run.shared_tensor(shape, dtype, name, loc)
    return new_allocation(run, shape, dtype, buffer, name, loc)


def _filled(shape, dtype, buffer, value, name):
    run = interpreter.current()
    from .memory import region
    buffer = region(buffer if buffer is not None else sbuf)
    if buffer in _HBM:
        fail("err_hbm_tensor_with_init_value_not_supported", "Creating HBM tensor with init value is not supported.",
             "create it with nl.ndarray(..., buffer=nl.shared_hbm) and initialize it with nl.store / nisa.dma_copy")
    t = new_allocation(run, shape, dtype, buffer, name, user_location(2))
    import itertools
    blocks = t.shape[:t.pdim]   # beta-1 block dimensions: one memset per tile
    for index in itertools.product(*[range(b) for b in blocks]):
        engines.memset(t[index] if index else t, value, op="zeros" if value == 0 else "full")
    return t


def zeros(shape, dtype, buffer=sbuf, name="", **kwargs):
    return _filled(shape, dtype, buffer, 0, name)


def ones(shape, dtype, buffer=sbuf, name="", **kwargs):
    return _filled(shape, dtype, buffer, 1, name)


def full(shape, fill_value, dtype, buffer=sbuf, name="", **kwargs):
    return _filled(shape, dtype, buffer, fill_value, name)


def zeros_like(x, dtype=None, buffer=None, name="", **kwargs):
    return _filled(x.shape, dtype or x.dtype, buffer or sbuf, 0, name)


def empty_like(x, dtype=None, buffer=None, name="", **kwargs):
    return ndarray(x.shape, dtype or x.dtype, buffer=buffer or (x.buffer if x.buffer is not shared_hbm else shared_hbm),
                   name=name)


def rand(shape, dtype, buffer=sbuf, name="", **kwargs):
    run = interpreter.current()
    t = new_allocation(run, shape, dtype, buffer, name, user_location())
    run.issue("VectorE", cost.stream_seconds(run.gen, "VectorE", checks.free_size(t), 0, t.dtype), writes=(t,))
    engines.write(t, torch.rand(t.shape, device=run.device))
    return t


def shared_identity_matrix(n, dtype=uint8, dst=None, **kwargs):
    run = interpreter.current()
    t = dst if dst is not None else new_allocation(run, (n, n), dtype, sbuf, "identity", user_location())
    run.issue("DMA", cost.dma_seconds(run.gen, n * n * _dt.lookup(dtype).itemsize, n), writes=(t,))
    engines.write(t, torch.eye(n, dtype=torch.float32, device=run.device))
    return t


def shared_constant(constant, dtype=None, **kwargs):
    run = interpreter.current()
    arr = np.load(constant) if isinstance(constant, str) else np.asarray(constant)
    d = _dt.lookup(dtype if dtype is not None else arr.dtype)
    t = new_allocation(run, arr.shape, d, private_hbm, "constant", user_location(), fill=0)
    engines.write(t, torch.from_numpy(np.ascontiguousarray(arr)).to(torch.float32).to(run.device))
    return t


# -- data movement ---------------------------------------------------------------------------------------------

def _masking(mask, *tiles, space=None):
    """Operands restricted to where a beta-1 mask holds, and the element predicate inside that box."""
    if mask is None:
        return tiles, None
    from .legacy import indexing
    return indexing.restrict(mask, tiles, space)


def load(src, dtype=None, mask=None, **kwargs):
    run = interpreter.current()
    checks.memory("load", "src", src, _HBM)
    out = engines.new_tile(run, src.shape, dtype or src.dtype, sbuf, temporary=True)
    (o, s), where = _masking(mask, out, src)
    engines.dma_copy(o, s, op="load", where=where)
    return out


def store(dst, value, mask=None, **kwargs):
    run = interpreter.current()
    checks.memory("store", "dst", dst, _HBM)
    if isinstance(value, NkiTensor):
        checks.memory("store", "value", value, (sbuf, psum) if run.legacy else (sbuf,))
        if value.shape != dst.shape and value.size != dst.size:
            value = engines.broadcast_free(value, dst.shape) if len(value.shape) == len(dst.shape) else value
        (d, v), where = _masking(mask, dst, value)
        engines.dma_copy(d, v, op="store", where=where, allow_psum=run.legacy)
    else:
        (d,), where = _masking(mask, dst)
        engines.dma_copy(d, value, op="store", where=where)


def load_transpose2d(src, dtype=None, mask=None, **kwargs):
    run = interpreter.current()
    checks.memory("load_transpose2d", "src", src, _HBM)
    if src.ndim != 2:
        fail("err_exceed_max_supported_dimension", f"parameter '{src.describe()}' of 'load_transpose2d' exceed max "
             "supported number of dimensions of 2.")
    out = engines.new_tile(run, (src.shape[1], src.shape[0]), dtype or src.dtype, sbuf, temporary=True)
    transposed = NkiTensor(src._alloc, (src.shape[1], src.shape[0]), (src.strides[1], src.strides[0]), src.offset,
                           None, src.dtype)
    (o, s), where = _masking(mask, out, transposed)
    engines.dma_copy(o, s, op="load_transpose2d", where=where)
    return out


def copy(x, dtype=None, mask=None, **kwargs):
    run = interpreter.current()
    out = engines.new_tile(run, x.shape, dtype or x.dtype, sbuf, temporary=True)
    (o, s), where = _masking(mask, out, x)
    engines.tensor_copy(o, s, op="copy", where=where)
    return out


# -- elementwise ---------------------------------------------------------------------------------------------

def _operand_shape(*xs):
    """Broadcast shape of tiles aligned at the partition dimension (a [P] or [P, 1] tile spans the free axes)."""
    shapes = [x.shape for x in xs if isinstance(x, NkiTensor)]
    nd = builtins.max(len(s) for s in shapes)
    out = []
    for a in range(nd):
        sizes = {s[a] if a < len(s) else 1 for s in shapes}
        sizes.discard(1)
        if len(sizes) > 1:
            if a == 0:
                names = tuple(f"x{i}" for i in range(len(xs)))
                checks.same_partitions("elementwise", names, tuple(x for x in xs if isinstance(x, NkiTensor)))
            fail("err_shape_mismatch", f"operand shapes {[list(s) for s in shapes]} do not broadcast on axis {a}",
                 "give both tiles the same shape, or a size-1 axis to broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _expand(x: NkiTensor, shape) -> NkiTensor:
    if x.shape == shape:
        return x
    xs = tuple(x.shape) + (1,) * (len(shape) - len(x.shape))
    strides = tuple(x.strides) + (0,) * (len(shape) - len(x.shape))
    strides = tuple(0 if s == 1 and n != 1 else st for s, n, st in zip(xs, shape, strides))
    return NkiTensor(x._alloc, shape, strides, x.offset, x.pdim, x.dtype)


def _check_compute_input(op, name, x):
    if isinstance(x, NkiTensor):
        checks.memory(op, name, x, _ON_CHIP)


_COMPARISONS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")


def _binary(opname, x, y, dtype=None, mask=None):
    run = interpreter.current()
    _check_compute_input(opname, "x", x)
    _check_compute_input(opname, "y", y)
    tiles = [v for v in (x, y) if isinstance(v, NkiTensor)]
    if not tiles:
        fail("err_scalar_operands", f"nl.{opname} needs at least one tile operand")
    shape = _operand_shape(*tiles)
    if dtype is None:
        if opname in _COMPARISONS and run.legacy:   # beta 1: comparisons give bool tiles
            dtype = bool_
        elif len(tiles) == 2:
            dtype = _dt.promote(tiles[0].dtype, tiles[1].dtype)
        else:
            scalar = y if isinstance(x, NkiTensor) else x
            dtype = float32 if isinstance(scalar, float) and not tiles[0].dtype.is_float else tiles[0].dtype
    out = engines.new_tile(run, shape, dtype, sbuf, temporary=True)
    if len(tiles) == 2:
        a, b = _expand(x, shape), _expand(y, shape)
        (o, a, b), where = _masking(mask, out, a, b)
        engines.tensor_tensor(o, a, b, opname, name=opname, where=where)
    else:
        t = _expand(tiles[0], shape)
        scalar = y if isinstance(x, NkiTensor) else x
        (o, t), where = _masking(mask, out, t)
        engines.tensor_scalar(o, t, opname, float(scalar), reverse0=not isinstance(x, NkiTensor), name=opname,
                              where=where)
    return out


def _unary(opname, x, dtype=None, mask=None, engine="ScalarE"):
    run = interpreter.current()
    _check_compute_input(opname, "x", x)
    out = engines.new_tile(run, x.shape, dtype or x.dtype, sbuf, temporary=True)
    (o, t), where = _masking(mask, out, x)
    if engine == "ScalarE":
        engines.activation(o, opname, t, name=opname, where=where)
    else:
        fn = _ops.UNARY[opname]
        engines._on_chip_operands(run, opname, "VectorE", {"x": t, "out": o})
        run.issue("VectorE", cost.stream_seconds(run.gen, "VectorE", checks.free_size(t), 1, t.dtype), reads=(t,),
                  writes=(o,))
        engines.write(o, fn(engines.read(t)), where)
    return out


def _make_binary(name):
    def f(x, y, dtype=None, mask=None, **kwargs):
        return _binary(name, x, y, dtype, mask)
    f.__name__ = f.__qualname__ = name
    f._nki_op = name
    f.__doc__ = f"nl.{name}(x, y): elementwise {name} on VectorE (fp32, rounded once to dtype)."
    return f


def _make_unary(name, engine="ScalarE"):
    def f(x, dtype=None, mask=None, **kwargs):
        return _unary(name, x, dtype, mask, engine)
    f.__name__ = f.__qualname__ = name
    f._nki_op = name
    f.__doc__ = f"nl.{name}(x): elementwise {name} ({engine}, fp32, rounded once to dtype)."
    return f


for _name in _ops.BINARY:
    globals()[_name] = _make_binary(_name)
for _name in _ops.UNARY:
    if _name not in ("copy",):
        globals()[_name] = _make_unary(_name, "VectorE" if _name in (
            "abs", "negative", "sign", "ceil", "floor", "trunc", "logical_not", "square") else "ScalarE")


def invert(x, dtype=None, mask=None, **kwargs):
    run = interpreter.current()
    out = engines.new_tile(run, x.shape, dtype or x.dtype, sbuf, temporary=True)
    run.issue("VectorE", cost.stream_seconds(run.gen, "VectorE", checks.free_size(x), 1, x.dtype), reads=(x,),
              writes=(out,))
    engines.write(out, torch.bitwise_not(x.data.to(torch.int64)) if not x.dtype.is_float else -engines.read(x) - 1)
    return out


invert._nki_op = "invert"
copy._nki_op = "copy"
bypass = _make_unary("bypass")
identity = bypass
prelu = "prelu"
average = "mean"


# -- reductions ------------------------------------------------------------------------------------------------

def _reduce(opname, x, axis, dtype=None, keepdims=False, mask=None, negate=False):
    run = interpreter.current()
    _check_compute_input(opname, "x", x)
    axes = engines._axes(axis, x.ndim, opname, x)
    shape = [1 if a in axes else s for a, s in enumerate(x.shape)] if keepdims else \
        [s for a, s in enumerate(x.shape) if a not in axes]
    out = engines.new_tile(run, tuple(shape) or (x.shape[0], 1), dtype or x.dtype, sbuf, temporary=True)
    (t,), _ = _masking(mask, x)
    engines.tensor_reduce(out, opname if opname != "mean" else "mean", t, axes, negate=negate, name=opname)
    return out


def sum(x, axis, dtype=None, keepdims=False, mask=None, **kwargs):
    return _reduce("add", x, axis, dtype, keepdims, mask)


def max(x, axis, dtype=None, keepdims=False, mask=None, **kwargs):
    return _reduce("maximum", x, axis, dtype, keepdims, mask)


def min(x, axis, dtype=None, keepdims=False, mask=None, **kwargs):
    return _reduce("minimum", x, axis, dtype, keepdims, mask)


def mean(x, axis, dtype=None, keepdims=False, mask=None, **kwargs):
    return _reduce("mean", x, axis, dtype, keepdims, mask)


def prod(x, axis, dtype=None, keepdims=False, mask=None, **kwargs):
    return _reduce("multiply", x, axis, dtype, keepdims, mask)


def all(x, axis, dtype=None, mask=None, **kwargs):
    return _reduce("logical_and", x, axis, dtype or bool_, False, mask)


def var(x, axis, dtype=None, keepdims=False, mask=None, **kwargs):
    m = mean(x, axis, dtype=float32, keepdims=True, mask=mask)
    d = subtract(x, m, dtype=float32)
    return mean(multiply(d, d, dtype=float32), axis, dtype=dtype or x.dtype, keepdims=True)


sum._nki_op, max._nki_op, min._nki_op, mean._nki_op, prod._nki_op = "add", "maximum", "minimum", "mean", "multiply"


def softmax(x, axis=-1, dtype=None, mask=None, **kwargs):
    """exp(x - max) / sum(exp(x - max)) along the free axis: VectorE max, ScalarE exp with its sum, VectorE scale."""
    run = interpreter.current()
    _check_compute_input("softmax", "x", x)
    axes = engines._axes(axis, x.ndim, "softmax", x)
    p = x.shape[0]
    m = engines.new_tile(run, (p, 1), float32, sbuf)
    engines.tensor_reduce(m, "maximum", x, axes, negate=True, name="softmax")
    e = engines.new_tile(run, x.shape, float32, sbuf)
    s = engines.new_tile(run, (p, 1), float32, sbuf)
    engines.activation(e, "exp", x, bias=m, reduce_op="add", reduce_res=s, reduce_cmd="reset_reduce", name="softmax")
    r = engines.new_tile(run, (p, 1), float32, sbuf)
    engines.reciprocal(r, s)
    out = engines.new_tile(run, x.shape, dtype or x.dtype, sbuf, temporary=True)
    engines.tensor_scalar(out, e, "multiply", r, name="softmax")
    return out


def rms_norm(x, w, axis, n, epsilon=1e-6, dtype=None, compute_dtype=None, mask=None, **kwargs):
    run = interpreter.current()
    p = x.shape[0]
    sq = engines.new_tile(run, x.shape, float32, sbuf)
    ss = engines.new_tile(run, (p, 1), float32, sbuf)
    engines.activation(sq, "square", x, reduce_op="add", reduce_res=ss, reduce_cmd="reset_reduce", name="rms_norm")
    inv = engines.new_tile(run, (p, 1), float32, sbuf)
    engines.tensor_scalar(inv, ss, "multiply", 1.0 / n, op1="add", operand1=float(epsilon), name="rms_norm")
    engines.activation(inv, "rsqrt", inv, name="rms_norm")
    y = engines.new_tile(run, x.shape, float32, sbuf)
    engines.tensor_scalar(y, x, "multiply", inv, name="rms_norm")
    out = engines.new_tile(run, x.shape, dtype or x.dtype, sbuf, temporary=True)
    engines.tensor_tensor(out, y, _expand(w, x.shape), "multiply", name="rms_norm")
    return out


def where(condition, x, y, dtype=None, mask=None, **kwargs):
    run = interpreter.current()
    tiles = [t for t in (condition, x, y) if isinstance(t, NkiTensor)]
    shape = _operand_shape(*tiles)
    ref = x if isinstance(x, NkiTensor) else y
    out = engines.new_tile(run, shape, dtype or (ref.dtype if isinstance(ref, NkiTensor) else float32), sbuf,
                           temporary=True)
    c = engines.read(_expand(condition, shape)) != 0
    xv = engines.read(_expand(x, shape)) if isinstance(x, NkiTensor) else torch.tensor(float(x), device=run.device)
    yv = engines.read(_expand(y, shape)) if isinstance(y, NkiTensor) else torch.tensor(float(y), device=run.device)
    run.issue("VectorE", cost.stream_seconds(run.gen, "VectorE", checks.free_size(out), len(tiles), out.dtype),
              reads=tuple(tiles), writes=(out,))
    engines.write(out, torch.where(c, xv, yv))
    return out


# -- TensorE -----------------------------------------------------------------------------------------------

def matmul(x, y, transpose_x=False, mask=None, **kwargs):
    """x @ y (x.T @ y with transpose_x=True) on TensorE into a new fp32 PSUM tile; without transpose_x, x is
    first transposed on TensorE (as the compiler inserts)."""
    run = interpreter.current()
    x, y = _in_sbuf(run, x), _in_sbuf(run, y)
    if not transpose_x:
        xt_ps = engines.new_tile(run, (x.shape[1], x.shape[0]), x.dtype, psum)
        engines.nc_transpose(xt_ps, x, op="matmul")
        xt = engines.new_tile(run, (x.shape[1], x.shape[0]), x.dtype, sbuf)
        engines.tensor_copy(xt, xt_ps, op="matmul")
        x = xt
    out = engines.new_tile(run, (checks.free_size(x), checks.free_size(y)), float32, psum, temporary=True)
    engines.nc_matmul(out, x, y, accumulate=False, op="matmul")
    return out


def _in_sbuf(run, t):
    """An operand of a convenience call in SBUF: a PSUM tile is copied there first (as the compiler does)."""
    if t.buffer is not psum:
        return t
    s = engines.new_tile(run, t.shape, t.dtype, sbuf)
    engines.tensor_copy(s, t, op="copy")
    return s


def transpose(x, dtype=None, mask=None, **kwargs):
    """Swap partition and free axes of a 2-D tile: VectorE up to 32x32, TensorE (into PSUM) up to 128x128."""
    run = interpreter.current()
    if x.ndim != 2:
        fail("err_exceed_max_supported_dimension", f"parameter '{x.describe()}' of 'transpose' exceed max supported "
             "number of dimensions of 2.", "index the tile down to 2 dimensions")
    small = x.shape[0] <= 32 and x.shape[1] <= 32
    out = engines.new_tile(run, (x.shape[1], x.shape[0]), x.dtype, sbuf if small or x.buffer is psum else psum,
                           temporary=True)
    engines.nc_transpose(out, x, engine="vector" if out.buffer is not psum else "tensor", op="transpose")
    if dtype is not None and _dt.lookup(dtype) != x.dtype:
        return copy(out, dtype=dtype)
    return out


# -- views -------------------------------------------------------------------------------------------------

def expand_dims(x, axis):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    for a in sorted(axes):
        x = x.expand_dim(a)
    return x


def broadcast_to(x, shape, dtype=None, **kwargs):
    return engines.broadcast_to(x, shape)


# -- SPMD ------------------------------------------------------------------------------------------------------

def program_id(axis=0):
    run = interpreter.current()
    axis = int(axis)
    if run.grid and not 0 <= axis < len(run.grid):
        fail("err_program_id_axis", f"nl.program_id({axis}): the launch grid {list(run.grid)} has "
             f"{len(run.grid)} axes")
    return run.program_id[axis] if run.grid else 0


def num_programs(axes=None):
    run = interpreter.current()
    if not run.grid:
        return 1
    if axes is None:
        return math.prod(run.grid)
    if isinstance(axes, int):
        return run.grid[axes]
    return math.prod(run.grid[a] for a in axes)


def program_ndim():
    run = interpreter.current()
    return len(run.grid)


# -- loops -------------------------------------------------------------------------------------------------

def affine_range(start, stop=None, step=1, **kwargs):
    """NKI 0.2+: a deprecated alias of range() (loops unroll); beta 1's parallel semantics: neuronxcc.nki."""
    return interpreter.loop("static", (start, stop, step) if stop is not None else (start,))


def sequential_range(start, stop=None, step=1, **kwargs):
    return interpreter.loop("sequential", (start, stop, step) if stop is not None else (start,))


def static_range(start, stop=None, step=1, **kwargs):
    return interpreter.loop("static", (start, stop, step) if stop is not None else (start,))


def dynamic_range(start, stop=None, step=1, **kwargs):
    return interpreter.loop("sequential", (start, stop, step) if stop is not None else (start,))


def fori_loop(lower, upper, body_fun, step=1):
    for i in range(int(lower), int(upper), int(step)):
        body_fun(i)


def no_reorder():
    import contextlib
    return contextlib.nullcontext()


def device_print(print_prefix, tensor, mask=None, **kwargs):
    """Prints at once (as AWS's simulator does); on a dry run (shape inference) nothing is printed."""
    run = interpreter.current()
    if run.meta:
        return
    data = tensor.data if isinstance(tensor, NkiTensor) else tensor
    print(print_prefix, data.detach().cpu().float().numpy() if isinstance(data, torch.Tensor) else data)


def static_cast(x, dtype):
    """beta 1: a NumPy array converted on the host (nl.static_cast(np_array, nl.bfloat16)): a NumPy array where
    NumPy has the dtype, else a CPU torch tensor (bfloat16, fp8)."""
    d = _dt.lookup(dtype)
    t = _dt.round_to(torch.as_tensor(np.asarray(x, dtype=np.float32)), d)
    return t.numpy() if d.dtype is not None else t


def _unsupported(name):
    def f(*args, **kwargs):
        raise NotImplementedError(f"nki.language.{name} is not emulated here (docs/nki.md lists what runs)")
    f.__name__ = name
    return f


for _name in ("dropout", "random_seed", "gather_flattened", "while_loop", "atomic_rmw", "all_reduce"):
    globals()[_name] = _unsupported(_name)

import types as _types  # noqa: E402

__all__ = [n for n, v in list(globals().items())
           if not n.startswith("_") and not isinstance(v, _types.ModuleType) and n != "annotations"]
