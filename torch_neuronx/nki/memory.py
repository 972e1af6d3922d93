"""The memories a kernel sees: HBM, SBUF and PSUM, their tensors, and views of them.

An `Allocation` is one tensor's storage: a flat torch tensor (host memory, or a meta tensor for a dry run)
in one memory region, with what the checks need to know about it (where it was made, its partition size,
when it was first and last used, which PSUM locations hold a matmul's partial sums). An `NkiTensor` is a view
of an allocation: shape, strides and offset in elements, as NKI defines views (`t[...]`, `.ap(...)`,
`.permute`, `.reshape`, ...), so every instruction reads and writes whole tiles through one strided torch view.

On-chip tensors (SBUF, PSUM) are 2-D memories of 128 partitions: the tensor's partition dimension (dim 0;
beta 1 also allowed leading "block" dims before it, `nl.par_dim`) maps to partitions, the rest to bytes within
each partition. Fresh on-chip tensors and kernel outputs hold NaN (integers: 4), as in AWS's simulator, so a
read of memory nobody wrote shows in the result.
"""

from __future__ import annotations

import math
from enum import Enum

import torch

from . import dtypes as dt
from .errors import fail, user_location


class MemoryRegion(Enum):
    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"

    def __repr__(self) -> str:
        return f"nl.{self.value}"

    __str__ = __repr__


sbuf = MemoryRegion.sbuf
psum = MemoryRegion.psum
private_hbm = MemoryRegion.private_hbm
hbm = private_hbm
shared_hbm = MemoryRegion.shared_hbm
ON_CHIP = (sbuf, psum)
HBM = (private_hbm, shared_hbm)


def region(buffer, what: str = "buffer") -> MemoryRegion:
    if isinstance(buffer, MemoryRegion):
        return buffer
    if getattr(buffer, "_nki_region", None) is not None:  # beta-1 allocator objects (nki.compiler.sbuf.*)
        return buffer._nki_region
    if isinstance(buffer, str):
        fail("err_unsupported_memory", f"{what}={buffer!r}: string buffer names are not accepted (NKI 0.3+)",
             f"pass the region object: buffer=nl.{buffer}" if buffer in MemoryRegion.__members__ else
             "pass nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm")
    fail("err_unsupported_memory", f"{what}={buffer!r} is not a memory region",
         "pass nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm")


class Allocation:
    """The storage of one tensor (flat, in its dtype) and what the checks track about it."""

    __slots__ = ("buffer", "flat", "dtype", "shape", "pdim", "name", "loc", "first", "last", "psum_state",
                 "psum_uniform",
                 "param", "mutable", "written", "temporary", "loop_depth", "writers", "output_slot",
                 "_as_dtype", "partitions", "partition_bytes")

    def __init__(self, buffer: MemoryRegion, flat: torch.Tensor, dtype: dt.DType, shape: tuple, pdim,
                 name: str = "", loc=None, step: int = 0):
        self.buffer = buffer
        self.flat = flat
        self.dtype = dtype
        self.shape = shape
        self.pdim = pdim                    # partition dim index (on-chip), None for HBM
        self.name = name
        self.loc = loc
        self.first = step                   # instruction index of its allocation and of its last use
        self.last = step
        self.psum_state = None              # PSUM: per element state (engines.py), when not all the same
        self.psum_uniform = 0               # ... the state of every element while they agree
        self.param = None                   # kernel parameter name (HBM inputs)
        self.mutable = True
        self.written = False
        self.temporary = False              # beta-1 instruction result not yet used as an operand
        self.loop_depth = 0                 # affine_range nesting where it was made
        self.writers = None                 # affine_range write-conflict maps
        self.output_slot = None             # index among the kernel's new shared_hbm tensors
        self._as_dtype = {}
        if pdim is not None:
            self.partitions = shape[pdim] if shape else 1
            rest = math.prod(s for i, s in enumerate(shape) if i != pdim)
            self.partition_bytes = rest * dtype.itemsize
        else:
            self.partitions = 0
            self.partition_bytes = 0

    @property
    def on_chip(self) -> bool:
        return self.buffer in ON_CHIP

    def flat_as(self, storage: torch.dtype) -> torch.Tensor:
        if storage == self.flat.dtype:
            return self.flat
        v = self._as_dtype.get(storage)
        if v is None:
            v = self._as_dtype[storage] = self.flat.view(storage)
        return v

    def describe(self) -> str:
        shape = "x".join(str(s) for s in self.shape)
        return f"{self.name or 'tensor'}[{shape}] {self.dtype} in {self.buffer.value}"


def contiguous_strides(shape) -> tuple:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))


class DynamicSlice:
    """nl.ds(start, size): a slice of `size` elements from `start`."""

    __slots__ = ("start", "size")

    def __init__(self, start, size):
        self.start, self.size = int(start), int(size)

    def as_slice(self) -> slice:
        return slice(self.start, self.start + self.size)


def ds(start, size) -> DynamicSlice:
    return DynamicSlice(start, size)


class NkiTensor:
    """A view of an allocation: `shape`, `strides` (elements) and `offset` into its storage, in `dtype`.

    Instructions read and write it as one strided torch view (`.data`); every view operation of NKI's
    NkiTensor returns another view of the same storage.
    """

    __slots__ = ("_alloc", "shape", "strides", "offset", "pdim", "dtype", "_data", "_indirect", "_oob",
                 "__weakref__")

    def __init__(self, alloc: Allocation, shape, strides, offset: int, pdim, dtype: dt.DType | None = None,
                 indirect=None):
        self._alloc = alloc
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.offset = int(offset)
        self.pdim = pdim
        self.dtype = dtype or alloc.dtype
        self._data = None
        self._indirect = indirect  # (dim, index NkiTensor, oob_skip) for vector_offset gather/scatter
        self._oob = None           # beta 1: an out-of-bound subscript, legal only under a mask excluding it

    # -- what NKI's NkiTensor offers -------------------------------------------------------------------
    @property
    def buffer(self) -> MemoryRegion:
        return self._alloc.buffer

    @property
    def name(self) -> str:
        return self._alloc.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def is_contiguous(self) -> bool:
        start = 1 if self._alloc.on_chip else 0
        expect = 1
        for i in range(len(self.shape) - 1, start - 1, -1):
            if self.shape[i] != 1 and self.strides[i] != expect:
                return False
            expect *= self.shape[i]
        return True

    def get_pattern(self) -> list:
        return [[st, sz] for st, sz in zip(self.strides, self.shape)]

    def is_indirect(self) -> bool:
        return self._indirect is not None

    def __repr__(self) -> str:
        return f"NkiTensor({self.name or 'tensor'}, shape={list(self.shape)}, dtype={self.dtype}, buffer={self.buffer})"

    def __len__(self) -> int:
        return self.shape[0]

    def __bool__(self):
        fail("err_dynamic_control_flow_not_supported",
             f"the truth value of tile {self.describe()} is a run-time value: Python control flow cannot depend on it",
             "compute with masks / nisa.affine_select / nl.where instead of `if` on tile values")

    def __iter__(self):
        fail("err_dynamic_control_flow_not_supported", f"iterating over tile {self.describe()} is not supported",
             "index it with slices, or loop over range(...) and index inside the loop")

    def describe(self) -> str:
        return f"{self.name or 'tensor'}[{', '.join(str(s) for s in self.shape)}]"

    # -- the strided torch view ------------------------------------------------------------------------
    @property
    def data(self) -> torch.Tensor:
        d = self._data
        if d is None:
            if self._oob is not None:
                fail("err_tensor_access_out_of_bound", self._oob,
                     "correct the indices, or mask the instruction (mask=index < size) to leave out the "
                     "out-of-bound part")
            if self._indirect is not None:
                fail("err_indirect_indices_are_not_supported_with_nki_api",
                     f"{self.describe()} uses indirect (vector_offset) addressing: only DMA (nisa.dma_copy, "
                     "nl.load, nl.store) can read or write it", "copy it with nisa.dma_copy")
            flat = self._alloc.flat_as(self.dtype.storage)
            # as_strided's offset counts from the storage's start: a parameter that is a view (x[128:]) starts later
            d = self._data = flat.as_strided(self.shape, self.strides, flat.storage_offset() + self.offset)
        return d

    def flat_indices(self) -> torch.Tensor:
        """Flat element indices (in the allocation's dtype) this view covers, shaped like it (CPU int64)."""
        idx = torch.arange(self._alloc.flat.numel(), dtype=torch.int64)
        if self.dtype.itemsize != self._alloc.dtype.itemsize:
            return None
        return idx.as_strided(self.shape, self.strides, self.offset)

    def covers_allocation(self) -> bool:
        a = self._alloc
        return (self.offset == 0 and self.size == a.flat.numel() and self.dtype.itemsize == a.dtype.itemsize
                and 0 not in self.strides and self._indirect is None)

    # -- views -------------------------------------------------------------------------------------------
    def _view(self, shape, strides, offset, pdim, dtype=None, indirect=None) -> "NkiTensor":
        v = NkiTensor(self._alloc, shape, strides, offset, pdim, dtype or self.dtype, indirect)
        _check_bounds(v)
        return v

    def __getitem__(self, key) -> "NkiTensor":
        return index(self, key)

    def __setitem__(self, key, value):
        from . import engines
        target = self[key] if key is not Ellipsis else self
        if target.same_view(value):  # `t[...] += x`: __iadd__ already wrote the view
            return
        engines.assign(target, value)

    def permute(self, dims) -> "NkiTensor":
        dims = tuple(int(d) % self.ndim for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            fail("err_invalid_view",
                 f"permute{dims} of {self.describe()}: dims must be a permutation of 0..{self.ndim - 1}")
        if self._alloc.on_chip and dims[0] != self.pdim:
            fail("err_invalid_view", f"permute{dims} of on-chip {self.describe()} moves the partition dimension",
                 "keep dim 0 first; transpose partitions with nisa.nc_transpose / nisa.dma_transpose")
        return self._view([self.shape[d] for d in dims], [self.strides[d] for d in dims], self.offset,
                          0 if self.pdim is not None else None)

    def broadcast(self, dim: int, size: int) -> "NkiTensor":
        dim = int(dim) % self.ndim
        if self.shape[dim] != 1:
            fail("err_invalid_view", f"broadcast({dim}, {size}) of {self.describe()}: dimension {dim} has size "
                 f"{self.shape[dim]}, only size-1 dimensions broadcast")
        shape, strides = list(self.shape), list(self.strides)
        shape[dim], strides[dim] = int(size), 0
        return self._view(shape, strides, self.offset, self.pdim)

    def expand_dim(self, dim: int) -> "NkiTensor":
        dim = int(dim) % (self.ndim + 1)
        shape, strides = list(self.shape), list(self.strides)
        shape.insert(dim, 1)
        strides.insert(dim, 1)
        pdim = self.pdim if self.pdim is None or dim > self.pdim else self.pdim + 1
        return self._view(shape, strides, self.offset, pdim)

    def squeeze_dim(self, dim: int) -> "NkiTensor":
        dim = int(dim) % self.ndim
        if self.shape[dim] != 1:
            fail("err_invalid_view",
                 f"squeeze_dim({dim}) of {self.describe()}: dimension {dim} has size {self.shape[dim]}")
        if self._alloc.on_chip and dim == self.pdim:
            fail("err_invalid_view", f"squeeze_dim({dim}) of on-chip {self.describe()} removes the partition dimension")
        shape, strides = list(self.shape), list(self.strides)
        del shape[dim], strides[dim]
        pdim = self.pdim if self.pdim is None or dim > self.pdim else self.pdim - 1
        return self._view(shape, strides, self.offset, pdim)

    def reshape_dim(self, dim: int, shape) -> "NkiTensor":
        dim = int(dim) % self.ndim
        shape = _infer(list(shape), self.shape[dim], f"reshape_dim({dim}, {tuple(shape)}) of {self.describe()}")
        new_strides, acc = [], self.strides[dim]
        for s in reversed(shape):
            new_strides.append(acc)
            acc *= s
        full_shape = list(self.shape[:dim]) + shape + list(self.shape[dim + 1:])
        full_strides = list(self.strides[:dim]) + list(reversed(new_strides)) + list(self.strides[dim + 1:])
        pdim = self.pdim
        if pdim is not None and dim < pdim:
            pdim += len(shape) - 1
        return self._view(full_shape, full_strides, self.offset, pdim)

    def flatten_dims(self, start_dim: int, end_dim: int) -> "NkiTensor":
        start_dim, end_dim = int(start_dim) % self.ndim, int(end_dim) % self.ndim
        if self._alloc.on_chip and start_dim <= (self.pdim or 0) <= end_dim and start_dim != end_dim:
            fail("err_invalid_view", f"flatten_dims({start_dim}, {end_dim}) of on-chip {self.describe()} merges the "
                 "partition dimension", "flatten free dimensions only (start_dim > 0)")
        for i in range(start_dim, end_dim):
            merged = self.strides[i] == self.strides[i + 1] * self.shape[i + 1]
            if self.shape[i + 1] != 1 and self.shape[i] != 1 and not merged:
                fail("err_invalid_view", f"flatten_dims({start_dim}, {end_dim}) of {self.describe()}: the dimensions "
                     "are not contiguous in memory", "copy to a contiguous tile first (nisa.tensor_copy)")
        size = math.prod(self.shape[start_dim:end_dim + 1])
        shape = list(self.shape[:start_dim]) + [size] + list(self.shape[end_dim + 1:])
        strides = list(self.strides[:start_dim]) + [self.strides[end_dim]] + list(self.strides[end_dim + 1:])
        pdim = self.pdim
        if pdim is not None and pdim > end_dim:
            pdim -= end_dim - start_dim
        return self._view(shape, strides, self.offset, pdim)

    def reshape(self, shape) -> "NkiTensor":
        shape = _infer(list(shape), self.size, f"reshape({tuple(shape)}) of {self.describe()}")
        if self._alloc.on_chip and shape[0] != self.shape[0]:
            fail("err_invalid_view", f"reshape({tuple(shape)}) of on-chip {self.describe()} changes the partition "
                 f"dimension ({self.shape[0]} -> {shape[0]})", "keep shape[0]; move data across partitions with DMA")
        strides = _view_strides(self.shape, self.strides, shape)
        if strides is None:
            fail("err_invalid_view", f"reshape({tuple(shape)}) of {self.describe()}: its memory layout (strides "
                 f"{list(self.strides)}) cannot be viewed in that shape", "copy to a contiguous tile first")
        return self._view(shape, strides, self.offset, 0 if self.pdim is not None else None)

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None) -> "NkiTensor":
        fixed = dict(fixed_sizes or {})
        names, view = [], self
        dim = 0
        for part in src_pattern:
            if isinstance(part, (tuple, list)):
                known = [fixed.get(n, -1) for n in part]
                view = view.reshape_dim(dim, known)
                names.extend(part)
                dim += len(part)
            else:
                names.append(part)
                dim += 1
        flat_dst = [n for part in dst_pattern for n in (part if isinstance(part, (tuple, list)) else [part])]
        view = view.permute([names.index(n) for n in flat_dst])
        dim = 0
        for part in dst_pattern:
            if isinstance(part, (tuple, list)):
                view = view.flatten_dims(dim, dim + len(part) - 1)
            dim += 1
        return view

    def slice(self, dim: int, start: int, end: int, step: int = 1) -> "NkiTensor":
        key = [slice(None)] * self.ndim
        key[int(dim) % self.ndim] = slice(start, end, step)
        return index(self, tuple(key))

    def select(self, dim: int, index_) -> "NkiTensor":
        if isinstance(index_, NkiTensor):
            raise NotImplementedError("NkiTensor.select with a dynamic (tensor) index is not emulated "
                                      "(docs/nki.md); use .ap(vector_offset=...) with nisa.dma_copy")
        dim = int(dim) % self.ndim
        shape, strides = list(self.shape), list(self.strides)
        i = int(index_)
        if not 0 <= i < shape[dim]:
            fail("err_tensor_access_out_of_bound", f"select({dim}, {i}) of {self.describe()}: index out of range")
        offset = self.offset + i * strides[dim]
        del shape[dim], strides[dim]
        pdim = self.pdim if self.pdim is None or dim > self.pdim else max(self.pdim - 1, 0)
        return self._view(shape, strides, offset, pdim)

    def ap(self, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim: int = 0,
           dtype=None) -> "NkiTensor":
        pattern = [(int(s), int(c)) for s, c in pattern]
        view_dtype = dt.lookup(dtype) if dtype is not None else self.dtype
        base = self.offset + (int(offset) if offset is not None else 0)
        if view_dtype.itemsize != self.dtype.itemsize:
            base = base * self.dtype.itemsize // view_dtype.itemsize
        shape = [c for _, c in pattern]
        strides = [s for s, _ in pattern]
        if scalar_offset is not None:
            if isinstance(scalar_offset, NkiTensor):
                value = int(scalar_offset.data.reshape(-1)[0].item()) if scalar_offset.data.device.type != "meta" else 0
            else:
                value = int(scalar_offset)
            base += value * strides[int(indirect_dim)]
        indirect = None
        if vector_offset is not None:
            if self._alloc.on_chip:
                fail("err_indirect_indices_free_dim", f"vector_offset on on-chip {self.describe()}: indirect "
                     "addressing applies to the HBM side of a DMA", "call .ap(vector_offset=...) on the HBM tensor")
            indirect = (int(indirect_dim), vector_offset, False)
        pdim = 0 if self._alloc.on_chip else None
        return self._view(shape, strides, base, pdim, view_dtype, indirect)

    def vector_select(self, dim: int, vector_offset: "NkiTensor") -> "NkiTensor":
        if int(dim) != 0 or self._alloc.on_chip:
            fail("err_indirect_indices_free_dim", f"vector_select({dim}) of {self.describe()}: only dim 0 of an HBM "
                 "tensor can be selected per partition")
        shape = [vector_offset.shape[0]] + list(self.shape[1:])
        return self._view(shape, self.strides, self.offset, None, None, (0, vector_offset, False))

    def view(self, dtype) -> "NkiTensor":
        new = dt.lookup(dtype)
        old = self.dtype
        if new.itemsize == old.itemsize:
            return self._view(self.shape, self.strides, self.offset, self.pdim, new)
        if self.strides[-1] != 1:
            fail("err_invalid_view", f"view({new}) of {self.describe()}: the last dimension is not contiguous")
        if new.itemsize < old.itemsize:
            r = old.itemsize // new.itemsize
            shape = list(self.shape[:-1]) + [self.shape[-1] * r]
            strides = [s * r for s in self.strides[:-1]] + [1]
            return self._view(shape, strides, self.offset * r, self.pdim, new)
        r = new.itemsize // old.itemsize
        if self.shape[-1] % r or self.offset % r or any(s % r for s in self.strides[:-1]):
            fail("err_invalid_view", f"view({new}) of {self.describe()}: the last dimension ({self.shape[-1]} {old}) "
                 f"is not a whole number of {new} elements")
        shape = list(self.shape[:-1]) + [self.shape[-1] // r]
        strides = [s // r for s in self.strides[:-1]] + [1]
        return self._view(shape, strides, self.offset // r, self.pdim, new)

    reinterpret_cast = view

    def indirect(self, index_, num_elem=None):
        raise NotImplementedError("tensor indirection (.indirect, NeuronCore-v4) is not emulated here (docs/nki.md)")

    # beta-1 tile operators (NKI 0.3+ tensors have none: legacy/tile_ops.py raises there)
    def _tile_op(self, name, other, reverse=False):
        from .legacy import tile_ops
        return tile_ops.binary(name, self, other, reverse)

    def __add__(self, o):
        return self._tile_op("add", o)

    def __radd__(self, o):
        return self._tile_op("add", o, True)

    def __sub__(self, o):
        return self._tile_op("subtract", o)

    def __rsub__(self, o):
        return self._tile_op("subtract", o, True)

    def __mul__(self, o):
        return self._tile_op("multiply", o)

    def __rmul__(self, o):
        return self._tile_op("multiply", o, True)

    def __truediv__(self, o):
        return self._tile_op("divide", o)

    def __rtruediv__(self, o):
        return self._tile_op("divide", o, True)

    def __pow__(self, o):
        return self._tile_op("power", o)

    def __lt__(self, o):
        return self._tile_op("less", o)

    def __le__(self, o):
        return self._tile_op("less_equal", o)

    def __gt__(self, o):
        return self._tile_op("greater", o)

    def __ge__(self, o):
        return self._tile_op("greater_equal", o)

    def __and__(self, o):
        return self._tile_op("logical_and", o)

    def __or__(self, o):
        return self._tile_op("logical_or", o)

    def __xor__(self, o):
        return self._tile_op("logical_xor", o)

    def __neg__(self):
        from .legacy import tile_ops
        return tile_ops.unary("negative", self)

    def __invert__(self):
        from .legacy import tile_ops
        return tile_ops.unary("logical_not", self)

    def __iadd__(self, o):
        from .legacy import tile_ops
        return tile_ops.accumulate(self, o, "add")

    def __isub__(self, o):
        from .legacy import tile_ops
        return tile_ops.accumulate(self, o, "subtract")

    def __imul__(self, o):
        from .legacy import tile_ops
        return tile_ops.accumulate(self, o, "multiply")

    def same_view(self, other) -> bool:
        return (isinstance(other, NkiTensor) and other._alloc is self._alloc and other.shape == self.shape
                and other.strides == self.strides and other.offset == self.offset and other.dtype == self.dtype)

    # beta-1 spellings
    @property
    def p(self):
        return self.shape[0]

    def broadcast_to(self, shape) -> "NkiTensor":
        from . import engines
        return engines.broadcast_to(self, shape)

    def __array__(self, dtype=None):
        import numpy as np
        a = self.data.detach().cpu()
        return np.asarray(a.float() if a.dtype == torch.bfloat16 else a, dtype=dtype)


def _infer(shape: list, total: int, what: str) -> list:
    if shape.count(-1) > 1:
        fail("err_invalid_view", f"{what}: at most one dimension may be -1")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = total // known if known else 0
    if math.prod(shape) != total:
        fail("err_invalid_view", f"{what}: {math.prod(shape)} elements, the tensor has {total}",
             "keep the element count (NKI 0.5 asserts it)")
    return [int(s) for s in shape]


def _view_strides(shape, strides, new_shape):
    """Strides of `new_shape` over the same memory (torch's view rule), or None if it needs a copy."""
    try:
        return torch.empty_strided(shape, strides, device="meta").view(new_shape).stride()
    except RuntimeError:
        return None


def _check_bounds(v: NkiTensor) -> None:
    if not v.shape or 0 in v.shape:
        return
    lo = v.offset + sum(st * (sz - 1) for st, sz in zip(v.strides, v.shape) if st < 0)
    hi = v.offset + sum(st * (sz - 1) for st, sz in zip(v.strides, v.shape) if st > 0)
    limit = v._alloc.flat.numel() * v._alloc.dtype.itemsize // v.dtype.itemsize
    if lo < 0 or hi >= limit:
        fail("err_tensor_access_out_of_bound",
             f"out-of-bound access for tensor {v._alloc.describe()}: the view covers elements [{lo}, {hi}] of "
             f"{limit}", "check the slice / access pattern bounds (mask the access in beta-1 kernels)")


def index(t: NkiTensor, key) -> NkiTensor:
    """t[key] with ints, slices, `...` and nl.ds, as NKI 0.3+ indexes (beta-1 arange indices: legacy/indexing.py)."""
    if not isinstance(key, tuple):
        key = (key,)
    hook = _advanced_index_hook
    if hook is not None and any(getattr(k, "_nki_index_expr", False) for k in key):
        return hook(t, key)
    if any(k is Ellipsis for k in key):
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (t.ndim - len(key) + 1) + key[i + 1:]
    if len(key) > t.ndim:
        fail("err_tensor_access_out_of_bound", f"{len(key)} indices for {t.ndim}-dimensional tensor {t.describe()}")
    on_chip = t._alloc.on_chip
    shape, strides, offset, pdim = [], [], t.offset, t.pdim
    removed_before_p = 0
    for d in range(t.ndim):
        k = key[d] if d < len(key) else slice(None)
        size, stride = t.shape[d], t.strides[d]
        if isinstance(k, DynamicSlice):
            k = k.as_slice()
        if isinstance(k, slice):
            start, stop, step = k.start, k.stop, k.step
            step = 1 if step is None else int(step)
            if step <= 0:
                fail("err_invalid_view", f"slice step {step} in {t.describe()}[...]: steps must be positive")
            start = 0 if start is None else int(start)
            stop = size if stop is None else int(stop)
            if start < 0:
                start += size
            if stop < 0:
                stop += size
            if start < 0 or stop > size or start > stop:
                fail("err_tensor_access_out_of_bound",
                     f"out-of-bound access for tensor {t.describe()} on dimension {d}: index range "
                     f"[{start}, {stop - 1}] exceed dimension size of {size}",
                     "fix the slice bounds (use min(...) for a last partial tile)")
            n = max(0, (stop - start + step - 1) // step)
            offset += start * stride
            shape.append(n)
            strides.append(stride * step)
        else:
            try:
                i = int(k)
            except TypeError:
                fail("err_invalid_view", f"index {k!r} of {t.describe()} is not an int, slice or nl.ds",
                     "index with ints and slices (beta-1 kernels: nl.arange / nl.mgrid through neuronxcc.nki)")
            if i < 0:
                i += size
            if not 0 <= i < size:
                fail("err_tensor_access_out_of_bound",
                     f"out-of-bound access for tensor {t.describe()} on dimension {d}: index {i} exceed "
                     f"dimension size of {size}")
            offset += i * stride
            if on_chip and d == t.pdim:
                shape.append(1)  # the partition dimension stays (size 1)
                strides.append(stride)
            elif pdim is not None and d < t.pdim:
                removed_before_p += 1
        # removed dims simply are not appended
    if pdim is not None:
        pdim -= removed_before_p
    if on_chip:
        while len(shape) < 2:  # on-chip results stay at least 2-D
            shape.append(1)
            strides.append(1)
    elif not shape:
        shape, strides = [1], [1]
    v = NkiTensor(t._alloc, shape, strides, offset, pdim, t.dtype, t._indirect)
    return v


_advanced_index_hook = None  # set by legacy.indexing: beta-1 nl.arange / nl.mgrid indices


def set_advanced_index_hook(fn) -> None:
    global _advanced_index_hook
    _advanced_index_hook = fn


def whole(alloc: Allocation) -> NkiTensor:
    return NkiTensor(alloc, alloc.shape, contiguous_strides(alloc.shape), 0, alloc.pdim)


def new_allocation(ctx, shape, dtype, buffer, name="", loc=None, fill=None) -> NkiTensor:
    """A fresh tensor in `buffer` on the running kernel's core (checks: partition limit, PSUM size)."""
    from . import checks
    shape, pdim = checks.normalize_shape(shape, buffer)
    dtype = dt.lookup(dtype)
    loc = loc or user_location(2)
    checks.allocation(ctx, shape, pdim, dtype, buffer, name, loc)
    numel = math.prod(shape)
    if fill is None:
        fill = dt.nan_fill(dtype)
    flat = torch.full((numel,), fill, dtype=dtype.storage, device=ctx.device) if numel else \
        torch.empty((0,), dtype=dtype.storage, device=ctx.device)
    alloc = Allocation(buffer, flat, dtype, tuple(shape), pdim, name, loc, ctx.step)
    ctx.allocated(alloc)
    return whole(alloc)
