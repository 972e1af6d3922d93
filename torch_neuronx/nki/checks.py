"""The NKI rules a kernel is checked against, each raising at the kernel line with the rule and its fix.

The rules and their sources (aws-neuron-sdk; @1db4d74e = the beta-1 docs):
  partition dimension <= 128 (pmax)                  programming_model "TC#1"; err_num_partition_exceed_arch_limit
  PSUM tile <= one 2 KiB bank per partition          "TC#2", nc_matmul "Tile size"; PSUM = 8 banks (migration guide)
  matmul: stationary free <= 128, moving free <= 512 "TC#3", nc_matmul (v4: moving up to 8 banks)
          (v4: 4096 fp32 / 8192 bf16), equal contraction (partition) sizes, fp32/tf32 only with fp32/tf32,
          inputs in SBUF and output in PSUM, dst fp32 (v2/v3) or fp32/bf16 (v4)
  operands in the right memory                       err_unsupported_memory (load from HBM, compute on SBUF/PSUM,
                                                     GpSimd cannot access PSUM, iota writes SBUF, ...)
  compute operands are tiles (partition dim first)   err_failed_to_infer_tile_from_local_tensor
  equal partition counts                             err_num_partition_mismatch
  [P,1] scale and bias, fp32 scale                   err_activation_scale_scalar_or_vector, _invalid_type, _bias_
  engine free size <= 64K (SBUF) / 4K (PSUM)         arch guide "Layout & Tile Size"; bn_stats free <= 512
  transposes <= 128x128 (TensorE), 32x32 (VectorE)   nc_transpose
  outputs in nl.shared_hbm                           migration guide 0.2 -> 0.3
  immutable parameters (beta 1)                      err_cannot_update_immutable_parameter (interpreter.py)
  affine_range iterations write distinct locations   err_unexpected_output_dependencies (interpreter.py)
  SBUF / PSUM capacity of the tiles live at once     architecture guides (sizes per generation); AWS's simulator
                                                     does not check it ("Simulation Limitations")
Where the hardware result is undefined (accumulating onto PSUM no matmul initialised) the check raises too.
"""

from __future__ import annotations

import math

from . import dtypes as dt
from .errors import NkiCapacityError, NkiCapacityWarning, fail, format_location
from .memory import HBM, NkiTensor, psum, sbuf, shared_hbm

PMAX = 128


class PartitionDim(int):
    """nl.par_dim(n): marks the partition dimension of a beta-1 tensor shape."""


def par_dim(n) -> PartitionDim:
    return PartitionDim(int(n))


def normalize_shape(shape, buffer) -> tuple[tuple, int | None]:
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(shape)
    pdim = None
    if buffer in (sbuf, psum):
        marked = [i for i, s in enumerate(shape) if isinstance(s, PartitionDim)]
        pdim = marked[0] if marked else 0
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        fail("err_invalid_shape", f"shape {shape!r} must be a tuple of ints")
    if any(s < 0 for s in shape):
        fail("err_invalid_shape", f"shape {list(shape)} has a negative dimension")
    return shape, pdim


def allocation(run, shape, pdim, dtype, buffer, name, loc) -> None:
    gen = run.gen
    if buffer in (sbuf, psum):
        if not shape:
            fail("err_invalid_shape", f"on-chip tensor {name or ''} needs a partition dimension (shape is empty)",
                 "give on-chip tensors at least shape (P, F)", loc)
        p = shape[pdim]
        if p > gen.pmax:
            fail("err_num_partition_exceed_arch_limit",
                 f"number of partitions {p} exceed architecture limitation of {gen.pmax} "
                 f"({_describe(name, shape, dtype, buffer)})",
                 f"split the partition dimension into tiles of nl.tile_size.pmax ({gen.pmax}) rows", loc)
        tile_bytes = math.prod(shape[pdim + 1:]) * dtype.itemsize   # one tile; beta-1 block dims add tiles
        limit = gen.psum_partition_bytes if buffer is psum else gen.sbuf_partition_bytes
        if tile_bytes > limit:
            what = "PSUM" if buffer is psum else "SBUF"
            fail("err_size_of_dimension_exceed_arch_limit",
                 f"{_describe(name, shape, dtype, buffer)} needs {tile_bytes} bytes per partition; "
                 f"{gen.name} {what} has {limit} bytes per partition",
                 "tile the free dimension: allocate smaller tiles and loop over them", loc)


def _describe(name, shape, dtype, buffer) -> str:
    return f"{name or 'tensor'}[{', '.join(str(s) for s in shape)}] {dtype} in {buffer.value}"


# -- operands ----------------------------------------------------------------------------------------------

def memory(op: str, name: str, t: NkiTensor, allowed: tuple) -> None:
    if t.buffer not in allowed:
        spaces = "|".join(sorted({"hbm" if b in HBM else b.value for b in allowed}))
        got = "hbm" if t.buffer in HBM else t.buffer.value
        fail("err_unsupported_memory",
             f"Expected operand '{name}' of '{op}' to be in address space '{spaces}', but got a tile in '{got}' "
             "instead.",
             _MEMORY_FIX.get((op, name), f"move '{name}' to {spaces} first (nl.load / nisa.dma_copy from HBM, "
                                         "nisa.tensor_copy out of PSUM)"))


_MEMORY_FIX = {
    ("load", "src"): "nl.load reads HBM tensors; an on-chip tile is already loaded (use it directly, or "
                     "nisa.tensor_copy)",
    ("nc_matmul", "dst"): "nc_matmul writes PSUM: allocate dst with buffer=nl.psum, then copy it to SBUF "
                          "(nisa.tensor_copy)",
    ("nc_matmul", "stationary"): "TensorE reads its inputs from SBUF: nisa.tensor_copy the PSUM tile to SBUF first",
    ("nc_matmul", "moving"): "TensorE reads its inputs from SBUF: nisa.tensor_copy the PSUM tile to SBUF first",
}


def tile(op: str, name: str, t: NkiTensor, gen) -> None:
    """An on-chip compute operand: a tile (partition dimension first) within the partition limit."""
    if t.pdim != 0:
        fail("err_failed_to_infer_tile_from_local_tensor",
             f"Failed to infer tile from tensor '{t.describe()}' (operand '{name}' of '{op}'): its partition "
             "dimension is not its first dimension",
             "index the block dimensions away (t[i]) so the partition dimension comes first")
    p = t.shape[0] if t.shape else 1
    if p > gen.pmax:
        fail("err_num_partition_exceed_arch_limit",
             f"number of partitions {p} of operand '{name}' ({t.describe()}) of '{op}' exceed architecture "
             f"limitation of {gen.pmax}", f"tile the partition dimension by nl.tile_size.pmax ({gen.pmax})")


def free_size(t: NkiTensor) -> int:
    return math.prod(t.shape[1:]) if len(t.shape) > 1 else 1


def engine_free_size(op: str, name: str, t: NkiTensor, gen) -> None:
    limit = gen.vector_psum_fmax if t.buffer is psum else gen.vector_sbuf_fmax
    n = free_size(t)
    if n > limit:
        fail("err_size_of_dimension_exceed_arch_limit",
             f"operand '{name}' ({t.describe()}) of '{op}' has {n} elements per partition; an engine instruction "
             f"streams at most {limit} from {t.buffer.value}", "split the free dimension over several instructions")


def same_partitions(op: str, names: tuple, tiles: tuple) -> None:
    ps = [t.shape[0] if t.shape else 1 for t in tiles]
    if len(set(ps)) > 1:
        params = ", ".join(f"{n}[{', '.join(str(s) for s in t.shape)}]" for n, t in zip(names, tiles))
        fail("err_num_partition_mismatch",
             f"number of partitions (dimension 0 size of a tile) mismatch in parameters ({params}) of '{op}'",
             "give all operands the same partition count; broadcast along partitions explicitly "
             "(t.broadcast_to(...) / nisa.nc_matmul with a ones vector)")


def same_free_elements(op: str, names: tuple, tiles: tuple) -> None:
    sizes = [free_size(t) for t in tiles]
    if len(set(sizes)) > 1:
        params = ", ".join(f"{n}[{', '.join(str(s) for s in t.shape)}]" for n, t in zip(names, tiles))
        fail("err_shape_mismatch", f"'{op}' needs the same number of elements per partition in ({params})",
             "use nisa.tensor_scalar for a [P,1] operand broadcast along the free dimension")


def vector_operand(op: str, name: str, value, parts: int, fp32_only: bool = False) -> None:
    """A scale / bias / scalar operand: a number, or a [P, 1] tile."""
    if not isinstance(value, NkiTensor):
        return
    shape = value.shape
    if len(shape) < 1 or free_size(value) != 1 or (shape[0] != parts and shape[0] != 1):
        rule = "err_activation_scale_scalar_or_vector" if name == "scale" else "err_invalid_vector_operand"
        fail(rule, f"{name} of '{op}' must be a scalar or a [{parts}, 1] vector spanning the partition dimension, "
             f"got {value.describe()}", f"pass a [{parts}, 1] tile (one value per partition) or a Python float")
    if fp32_only and value.dtype != dt.float32:
        rule = "err_activation_scale_invalid_type" if name == "scale" else "err_invalid_vector_operand"
        fail(rule, f"{name} of '{op}' must be float32, got {value.dtype}", f"nisa.tensor_copy it into a float32 tile")
    if name == "bias" and value.dtype not in (dt.float32, dt.float16, dt.bfloat16):
        fail("err_activation_bias_invalid_type",
             f"Bias parameter of '{op}' must be a vector of type float32, float16, or bfloat16, got {value.dtype}",
             "copy the bias into a float32 tile")


def matmul(run, dst: NkiTensor, stationary: NkiTensor, moving: NkiTensor, is_transpose: bool,
           tile_size=(), perf_mode=None) -> None:
    gen = run.gen
    memory("nc_matmul", "stationary", stationary, (sbuf,))
    memory("nc_matmul", "moving", moving, (sbuf,))
    memory("nc_matmul", "dst", dst, (psum,))
    for n, t in (("stationary", stationary), ("moving", moving), ("dst", dst)):
        tile("nc_matmul", n, t, gen)
    k_s, k_m = stationary.shape[0], moving.shape[0]
    rows = tile_size[0] if tile_size else gen.pmax
    cols = tile_size[1] if tile_size else gen.gemm_stationary_fmax
    if k_s != k_m:
        fail("err_matmul_contraction_mismatch",
             f"nc_matmul contracts over the partition dimension of both inputs: stationary {stationary.describe()} "
             f"has {k_s} partitions, moving {moving.describe()} has {k_m}",
             "put the contraction axis on the partition dimension of both tiles (LC#1) with the same size")
    if k_s > rows:
        fail("err_num_partition_exceed_arch_limit", f"nc_matmul contraction (partition) size {k_s} exceeds {rows}",
             "split the contraction into chunks of 128 partitions, accumulating in PSUM")
    m = free_size(stationary)
    n = free_size(moving)
    if m > cols:
        fail("err_matmul_stationary_free_size",
             f"nc_matmul stationary {stationary.describe()} has free size {m}; the stationary free size must not "
             f"exceed nl.tile_size.gemm_stationary_fmax ({cols})",
             "tile the stationary (output partition) dimension by 128: one nc_matmul per 128 columns")
    dst_itemsize = dst.dtype.itemsize
    n_max = gen.gemm_moving_fmax(dst_itemsize)
    if n > n_max:
        fail("err_matmul_moving_free_size",
             f"nc_matmul moving {moving.describe()} has free size {n}; on {gen.name} the moving free size must not "
             f"exceed {n_max} (nl.tile_size.gemm_moving_fmax: one PSUM bank of fp32)",
             f"tile the moving free dimension by {n_max}: one nc_matmul per {n_max} columns")
    if tuple(dst.shape[:1]) != (m,) or free_size(dst) != n:
        fail("err_matmul_output_shape",
             f"nc_matmul dst {dst.describe()} must be [stationary free, moving free] = [{m}, {n}]",
             "allocate dst as nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)")
    sd, md = stationary.dtype, moving.dtype
    fp32ish = (dt.float32, dt.tfloat32)
    if not is_transpose and ((sd in fp32ish) != (md in fp32ish)):
        fail("err_matmul_fp32_pairing",
             f"nc_matmul inputs {sd} and {md}: if one input is float32/tfloat32 the other must be too",
             "cast both inputs to the same precision (nisa.tensor_copy into bfloat16 tiles, or both float32)")
    if not is_transpose and (dt.float8_e4m3 in (sd, md)) and (dt.float8_e4m3fn in (sd, md)):
        fail("err_matmul_dtype", "nc_matmul cannot mix legacy float8_e4m3 and OCP float8_e4m3fn inputs")
    if not is_transpose and not all(d.is_float for d in (sd, md)):
        fail("err_matmul_dtype", f"nc_matmul inputs must be float (fp8/bf16/fp16/tf32/fp32), got {sd} and {md}",
             "cast the inputs to bfloat16 or float32")
    if is_transpose:
        if dst.dtype != sd:
            fail("err_transpose_dtype", f"transpose output dtype {dst.dtype} must equal the input dtype {sd}")
    elif gen.version < 4 and dst.dtype != dt.float32:
        fail("err_matmul_dst_dtype", f"nc_matmul dst dtype must be float32 on {gen.name}, got {dst.dtype}",
             "allocate the PSUM tile as nl.float32 (bfloat16 PSUM output needs NeuronCore-v4)")
    elif dst.dtype not in (dt.float32, dt.bfloat16):
        fail("err_matmul_dst_dtype", f"nc_matmul dst dtype must be float32 or bfloat16, got {dst.dtype}")
    psum_bank(run, "nc_matmul", dst, gen.psum_banks if gen.version >= 4 else 1)


def psum_bank(run, op: str, dst: NkiTensor, banks: int | None = None) -> None:
    """A PSUM operand is a tile of one bank (TC#2): at most 2 KiB per partition, not crossing a bank boundary
    (a NeuronCore-v4 matmul output may span all 8 banks)."""
    gen = run.gen
    if banks is None:  # NeuronCore-v4 engines read matmul outputs that span banks
        banks = gen.psum_banks if gen.version >= 4 else 1
    item = dst.dtype.itemsize
    start = partition_byte_offset(dst)
    span = free_size(dst) * item
    bank = gen.psum_bank_bytes
    if span > bank * banks:
        fail("err_psum_tile_exceeds_bank",
             f"'{op}' PSUM operand {dst.describe()} has {span} bytes per partition; a PSUM tile holds at most "
             f"{bank * banks} bytes ({'one 2 KiB bank' if banks == 1 else f'{banks} banks'}: "
             f"{bank * banks // 4} fp32) per partition",
             f"tile the output free dimension by nl.tile_size.psum_fmax ({bank // 4} fp32)")
    if banks == 1 and start // bank != (start + span - 1) // bank:
        fail("err_psum_tile_crosses_bank",
             f"'{op}' PSUM operand {dst.describe()} spans bytes [{start}, {start + span}) of its partition and "
             f"crosses a 2 KiB bank boundary", "keep each PSUM tile inside one bank (2 KiB per partition)")


def partition_byte_offset(t: NkiTensor) -> int:
    """Where a view starts within each partition of its on-chip tensor, in bytes."""
    a = t._alloc
    rest, idx = t.offset, []
    for s in reversed(a.shape):
        idx.append(rest % s if s else 0)
        rest = rest // s if s else 0
    idx.reverse()
    off, mult = 0, 1
    for d in range(len(a.shape) - 1, -1, -1):
        if d == a.pdim:
            continue
        off += idx[d] * mult
        mult *= a.shape[d]
    return off * a.dtype.itemsize


def transpose(run, op: str, engine: str, dst: NkiTensor, data: NkiTensor) -> None:
    gen = run.gen
    tile(op, "data", data, gen)
    tile(op, "dst", dst, gen)
    p, f = data.shape[0], free_size(data)
    limit = gen.pmax if engine == "TensorE" else 32
    if p > limit or f > limit:
        which = 0 if p > limit else 1
        fail("err_size_of_dimension_exceed_arch_limit",
             f"size of dimension {which} in '{data.describe()}' of '{op}' exceed architecture limitation of {limit} "
             f"({'TensorE' if limit == gen.pmax else 'VectorE'} transposes at most {limit}x{limit})",
             f"transpose {limit}x{limit} blocks one at a time")
    if dst.shape[0] != f or free_size(dst) != p:
        fail("err_transpose_shape", f"'{op}' of {data.describe()} writes [{f}, {p}], dst is {dst.describe()}")
    if dst.dtype != data.dtype:
        fail("err_transpose_dtype", f"'{op}' output dtype {dst.dtype} must equal the input dtype {data.dtype}",
             "transpose in the input dtype, then convert with nisa.tensor_copy")
    if engine == "TensorE":
        memory(op, "data", data, (sbuf,))
        memory(op, "dst", dst, (psum,))
        psum_bank(run, op, dst, 1)


def outputs(result) -> None:
    for t in result:
        if t.buffer is not shared_hbm:
            fail("err_output_must_be_shared_hbm",
                 f"kernel output {t.describe()} is in {t.buffer.value}: outputs must be nl.shared_hbm tensors "
                 "(NKI 0.3+)", "allocate it with nl.ndarray(shape, dtype=..., buffer=nl.shared_hbm)")


# -- capacity ---------------------------------------------------------------------------------------------

def capacity(run) -> None:
    """The tiles alive at the same time (from allocation to last use) must fit the core's SBUF and PSUM.

    SBUF: bytes per partition summed; PSUM: each tensor starts at a bank boundary, so it takes
    ceil(bytes / 2 KiB) of the 8 banks (7 when NKI_DMA_TRANSPOSE_AS_PE_TRANSPOSE reserves one).
    """
    import os
    gen = run.gen
    allocs = [a for a in run.on_chip if not a.temporary]
    banks = gen.psum_banks - (1 if os.environ.get("NKI_DMA_TRANSPOSE_AS_PE_TRANSPOSE", "").lower() == "true" else 0)
    for buf, limit, unit in ((sbuf, gen.sbuf_partition_bytes, "bytes"), (psum, banks, "banks")):
        live = [a for a in allocs if a.buffer is buf]
        if not live:
            continue
        def size(a):
            return a.partition_bytes if buf is sbuf else -(-a.partition_bytes // gen.psum_bank_bytes)
        events = sorted([(a.first, 1, i) for i, a in enumerate(live)] +
                        [(a.last + 1, 0, i) for i, a in enumerate(live)])
        used, peak, cur, over = 0, 0, set(), None
        for step, kind, i in events:
            if kind == 1:
                cur.add(i)
                used += size(live[i])
                peak = max(peak, used)
                if used > limit and over is None:   # the allocation that no longer fits
                    over = (step, used, list(cur), live[i])
            else:
                cur.discard(i)
                used -= size(live[i])
        if over is not None:
            at, need, live_set, newest = over
            tiles = sorted((live[i] for i in live_set), key=lambda a: -size(a))
            lines = []
            for a in tiles[:8]:
                where, _ = format_location(a.loc) if a.loc else ("?", "")
                lines.append(f"    {a.describe()}: {size(a)} {unit} (made at {where})")
            more = f"\n    ... and {len(tiles) - 8} more" if len(tiles) > 8 else ""
            what = "SBUF" if buf is sbuf else "PSUM"
            total = (f"{limit} bytes per partition ({gen.sbuf_bytes // 2**20} MiB)" if buf is sbuf else
                     f"{limit} banks of 2 KiB per partition")
            fix = ("free tiles sooner (smaller tiles, fewer live at once: move the allocation into the loop that uses "
                   "it), or spill to HBM yourself" if buf is sbuf else
                   "keep at most 8 PSUM tiles live: copy matmul results to SBUF (nisa.tensor_copy) before the next "
                   "one, reuse one PSUM tile per loop iteration")
            message = (f"{what} capacity exceeded: the tiles live at instruction {at} need {need} {unit} (at most "
                       f"{peak} later), {gen.name}'s {what} has {total}. Live tiles:\n" + "\n".join(lines) + more)
            if run.legacy:  # beta 1's compiler spilled what did not fit (programming_model.rst): slow, not wrong
                import warnings
                where, _ = format_location(newest.loc) if newest.loc else ("?", "")
                warnings.warn(f"{where}: [{'err_' + what.lower() + '_capacity'}] {message}\nThe beta-1 compiler "
                              f"spills the overflow to {'SBUF' if buf is psum else 'HBM'} (slow). Fix: {fix}",
                              NkiCapacityWarning, stacklevel=2)
                continue
            raise NkiCapacityError("err_" + what.lower() + "_capacity", message, fix, newest.loc)
