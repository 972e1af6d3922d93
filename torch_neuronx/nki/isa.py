"""nki.isa (`import nki.isa as nisa`), NKI 0.3+: one NeuronCore instruction per call, destination first.

Each call checks its operands and executes on whole tiles (engines.py). Instructions not emulated here raise
NotImplementedError naming themselves (docs/nki.md lists what runs).
"""

from __future__ import annotations

from enum import Enum

from . import engines
from . import interpreter
from .errors import NkiError
from .language import equal, maximum  # noqa: F401  (nisa's defaults name them)


class engine(Enum):
    tensor = 1
    vector = 5
    scalar = 2
    gpsimd = 3
    dma = 4
    sync = 6
    unknown = 0


tensor_engine, vector_engine, scalar_engine, gpsimd_engine, unknown_engine = (
    engine.tensor, engine.vector, engine.scalar, engine.gpsimd, engine.unknown)


class reduce_cmd(Enum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(Enum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(Enum):
    error = 0
    skip = 1


class matmul_perf_mode(Enum):
    none = "none"
    double_row = "double_row"


class nc_version(Enum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


class dma_engine(Enum):
    dma = 1
    gpsimd_dma = 2


NkiValidationError = NkiError


def get_nc_version():
    from . import target
    run = interpreter.active()
    gen = run.gen if run is not None else target.current()
    return nc_version(gen.version)


def get_nc_sub_version():
    return 0


def dma_copy(dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown, engine=engine.unknown,
             name=None):
    engines.dma_copy(dst, src, dge_mode=dge_mode, oob_mode=oob_mode)


def dma_transpose(dst, src, axes=None, priority=None, dge_mode=dge_mode.unknown, oob_mode=oob_mode.error, name=None):
    """A DMA transpose (2-D: [A, B] -> [B, A]; 3-D/4-D by `axes`)."""
    from . import checks
    from .memory import NkiTensor, sbuf
    checks.memory("dma_transpose", "dst", dst, (sbuf,))
    axes = tuple(axes) if axes is not None else tuple(reversed(range(src.ndim))) if src.ndim < 4 else (3, 1, 2, 0)
    view = NkiTensor(src._alloc, [src.shape[a] for a in axes], [src.strides[a] for a in axes], src.offset, None,
                     src.dtype)
    engines.dma_copy(dst, view, op="dma_transpose", dge_mode=dge_mode, oob_mode=oob_mode)


def tensor_copy(dst, src, engine=engine.unknown, name=None, dtype=None):
    """`dtype=` (NKI 0.2 tutorials pass it) must be dst's dtype: the destination decides the conversion."""
    if dtype is not None:
        from . import dtypes as dt
        from .errors import fail
        if dt.lookup(dtype) != dst.dtype:
            fail("err_tensor_copy_dtype", f"tensor_copy(dtype={dt.lookup(dtype)}) into {dst.describe()} of dtype "
                 f"{dst.dtype}: the destination's dtype is the result's", "drop dtype= or allocate dst in that dtype")
    engines.tensor_copy(dst, src, engine)


def memset(dst, value, engine=engine.unknown, name=None):
    engines.memset(dst, value, engine)


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None):
    engines.tensor_copy_predicated(dst, src, predicate, reverse_pred)


def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              accumulate=None, tile_position=(), tile_size=(), perf_mode=matmul_perf_mode.none, name=None):
    engines.nc_matmul(dst, stationary, moving, accumulate, is_transpose, tile_position, tile_size, perf_mode)


def nc_transpose(dst, data, engine=engine.unknown, name=None):
    engines.nc_transpose(dst, data, engine)


def tensor_tensor(dst, data1, data2, op, engine=engine.unknown, name=None):
    engines.tensor_tensor(dst, data1, data2, op, engine)


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=engine.unknown, name=None):
    engines.tensor_scalar(dst, data, op0, operand0, reverse0, op1, operand1, reverse1, engine)


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, name=None):
    engines.scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0, reverse1)


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
    engines.tensor_reduce(dst, op, data, axis, negate, keepdims)


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               name=None):
    engines.activation(dst, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd)


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    engines.activation_reduce(dst, op, data, reduce_op, reduce_res, bias, scale)


def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=None, reduce_init=0.0, name=None):
    engines.exponential(dst, src, max_value, reduce_res, reduce_cmd, reduce_init)


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None, reduce_res_negate=False, name=None):
    engines.tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res, reverse0, reduce_cmd, reduce_init,
                                 reduce_res_negate)


def reciprocal(dst, data, name=None):
    engines.reciprocal(dst, data)


def iota(dst, pattern, offset=0, channel_multiplier=0, name=None):
    engines.iota(dst, pattern, offset, channel_multiplier)


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=equal, offset=0, name=None):
    engines.affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op, offset)


def bn_stats(dst, data, name=None):
    engines.bn_stats(dst, data)


def bn_aggr(dst, data, name=None):
    engines.bn_aggr(dst, data)


def _unsupported(name):
    def f(*args, **kwargs):
        raise NotImplementedError(f"nki.isa.{name} is not emulated here (docs/nki.md lists the instructions that run)")
    f.__name__ = name
    return f


for _name in ("nc_matmul_mx", "tensor_partition_reduce", "tensor_scalar_cumulative", "activate2", "local_gather",
              "nc_n_gather", "tensor_tensor_scan", "nc_stream_shuffle", "rng", "dropout", "set_rng_seed",
              "rand_set_state", "rand_get_state", "rand2", "max8", "sequence_bounds",
              "core_barrier", "dma_compute", "quantize_mx", "range_select", "select_reduce", "sendrecv",
              "register_alloc", "register_move", "register_load", "register_store", "nc_find_index8",
              "nc_match_replace8", "nonzero_with_count", "topk"):
    globals()[_name] = _unsupported(_name)
