"""Beta 1's index expressions: nl.arange / nl.mgrid indices, affine subscripts, and `mask=` predicates.

`i_p = nl.arange(128)[:, None]; i_f = nl.arange(512)[None, :]; x[i * 128 + i_p, i_f]` addresses a [128, 512]
tile: each index is an integer tensor over the result's axes (broadcast like NumPy), and an affine one
(c + sum of steps along result axes) makes the tile a strided view, as the hardware's access patterns are.
Out-of-bound subscripts are an error (err_tensor_access_out_of_bound) unless the instruction's `mask=`
excludes them: a mask (`i * 128 + i_p < n`) is a boolean tensor over the same axes; the instruction runs on
the box where it holds, and inside that box only where it holds.
(aws-neuron-sdk@1db4d74e nki/programming_model.rst "Tensor Indexing", nki/api/nki.errors.rst)
"""

from __future__ import annotations

import torch

from ..errors import fail
from ..memory import NkiTensor, _check_bounds


def _vals(x):
    return x.values if isinstance(x, (IndexExpr, MaskExpr)) else x


class IndexExpr:
    """An integer index tensor over result axes (affine in nl.arange / nl.mgrid, loop variables, program ids)."""

    _nki_index_expr = True
    __slots__ = ("values",)

    def __init__(self, values: torch.Tensor):
        self.values = values

    @property
    def shape(self):
        return tuple(self.values.shape)

    def __getitem__(self, key):
        return IndexExpr(self.values[key])

    def _bin(self, other, fn):
        return IndexExpr(fn(self.values, _vals(other)))

    def __add__(self, o):
        return self._bin(o, torch.add)

    __radd__ = __add__

    def __sub__(self, o):
        return self._bin(o, torch.sub)

    def __rsub__(self, o):
        return IndexExpr(_vals(o) - self.values)

    def __mul__(self, o):
        return self._bin(o, torch.mul)

    __rmul__ = __mul__

    def __floordiv__(self, o):
        return self._bin(o, lambda a, b: torch.div(a, b, rounding_mode="floor"))

    def __mod__(self, o):
        return self._bin(o, torch.remainder)

    def __neg__(self):
        return IndexExpr(-self.values)

    def _cmp(self, o, fn):
        return MaskExpr(fn(self.values, _vals(o)))

    def __lt__(self, o):
        return self._cmp(o, torch.lt)

    def __le__(self, o):
        return self._cmp(o, torch.le)

    def __gt__(self, o):
        return self._cmp(o, torch.gt)

    def __ge__(self, o):
        return self._cmp(o, torch.ge)

    def __eq__(self, o):
        return self._cmp(o, torch.eq)

    def __ne__(self, o):
        return self._cmp(o, torch.ne)

    __hash__ = None

    def __bool__(self):
        fail("err_control_flow_condition_depending_on_arange",
             "Control-flow depending on `nl.arange` or `nl.mgrid` is not supported.",
             "express the condition as a mask= on the instruction")


class MaskExpr:
    """A predicate over result axes (comparisons of index expressions, combined with & | ~)."""

    _nki_index_expr = True
    __slots__ = ("values",)

    def __init__(self, values: torch.Tensor):
        self.values = values

    def __and__(self, o):
        return MaskExpr(self.values & _mask_vals(o))

    __rand__ = __and__

    def __or__(self, o):
        return MaskExpr(self.values | _mask_vals(o))

    __ror__ = __or__

    def __invert__(self):
        return MaskExpr(~self.values)

    def __bool__(self):
        fail("err_control_flow_condition_depending_on_arange",
             "Control-flow depending on `nl.arange` or `nl.mgrid` is not supported.",
             "pass the condition as mask= to the instruction")


def _mask_vals(o):
    if isinstance(o, MaskExpr):
        return o.values
    return torch.tensor(bool(o))


def arange(*args) -> IndexExpr:
    return IndexExpr(torch.arange(*[int(a) for a in args], dtype=torch.int64))


class _Grid(tuple):
    """nl.mgrid[...]'s result: the index tensors, also as .p (partition) and .x (last free axis)."""

    @property
    def p(self):
        return self[0]

    @property
    def x(self):
        return self[-1]

    @property
    def y(self):
        return self[-2]

    @property
    def z(self):
        return self[-3]


class _MGrid:
    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        ranges = [torch.arange(k.start or 0, k.stop, k.step or 1, dtype=torch.int64) for k in key]
        n = len(ranges)
        out = []
        for i, r in enumerate(ranges):
            shape = [1] * n
            shape[i] = r.numel()
            out.append(IndexExpr(r.reshape(shape)))
        return _Grid(out)


mgrid = _MGrid()


# -- subscripts ------------------------------------------------------------------------------------------------

def advanced_index(t: NkiTensor, key: tuple) -> NkiTensor:
    """t[i_p, i_f] with index expressions: a strided view over the broadcast shape of the indices."""
    if any(isinstance(k, (slice, type(Ellipsis))) for k in key):
        fail("err_unsupported_mixing_basic_advanced_tensor_indexing",
             "Mixing basic tensor indexing and advanced tensor indexing is not supported.",
             "index with nl.arange / nl.mgrid on every dimension, or with slices on every dimension")
    if len(key) > t.ndim:
        fail("err_tensor_access_out_of_bound", f"{len(key)} indices for {t.ndim}-dimensional tensor {t.describe()}")
    key = tuple(key) + tuple(0 for _ in range(t.ndim - len(key)))
    exprs = [k for k in key if isinstance(k, IndexExpr)]
    for e in exprs:
        if e.values.dim() < 2:
            fail("err_1d_arange_not_supported", "Indexing a NKI tensor with 1D arange is not supported.",
                 "add an axis: nl.arange(n)[:, None] for the partition index, nl.arange(n)[None, :] for a free one")
    if any(isinstance(k, MaskExpr) for k in key):
        fail("err_invalid_index", "a mask (comparison) is not an index", "pass it as mask= to the instruction")
    shape = torch.broadcast_shapes(*[e.values.shape for e in exprs])
    r = len(shape)
    offset = t.offset
    strides = [0] * r
    spans = []
    indirect = None
    for d, k in enumerate(key):
        if isinstance(k, NkiTensor):
            # a tile of indices (dynamic addressing): dim d at the row each of its values names, one per
            # partition of the access; an indirect DMA (checked, or skipped with oob_mode.skip, at run time)
            indirect = _dynamic_index(t, d, k, indirect, r)
            spans.append((d, 0, 0, []))
        elif isinstance(k, IndexExpr):
            v = k.values
            full = v.expand(shape) if tuple(v.shape) != tuple(shape) else v
            origin = int(full[(0,) * r])
            steps = []
            for a in range(r):
                if shape[a] > 1:
                    unit = [0] * r
                    unit[a] = 1
                    steps.append(int(full[tuple(unit)]) - origin)
                else:
                    steps.append(0)
            affine = origin + sum(
                (torch.arange(shape[a], dtype=torch.int64).reshape([-1 if i == a else 1 for i in range(r)]) * steps[a])
                for a in range(r))
            if not torch.equal(torch.as_tensor(affine).expand(shape), full):
                raise NotImplementedError(f"a non-affine index expression on dimension {d} of {t.describe()} "
                                          "(its values are not start + step * index): not emulated here")
            lo = origin + sum(min(0, s * (shape[a] - 1)) for a, s in enumerate(steps))
            hi = origin + sum(max(0, s * (shape[a] - 1)) for a, s in enumerate(steps))
            spans.append((d, lo, hi, [a for a, s in enumerate(steps) if s]))
            offset += origin * t.strides[d]
            for a in range(r):
                strides[a] += steps[a] * t.strides[d]
        else:
            i = int(k)
            spans.append((d, i, i, []))
            offset += i * t.strides[d]
    pdim = None
    if t.pdim is not None:
        pd = spans[t.pdim]
        if pd[3] and pd[3] != [0]:
            fail("err_partition_index", f"the partition dimension of {t.describe()} must be indexed along the first "
                 "axis of the tile", "index it with nl.arange(n)[:, None] (or .p of nl.mgrid)")
        pdim = 0
    oob = []
    for d, lo, hi, _ in spans:
        if lo < 0 or hi >= t.shape[d]:
            oob.append(f"Out-of-bound access for tensor `{t.name or 'tensor'}` on dimension {d}: index range "
                       f"[{lo}, {hi}] exceed dimension size of {t.shape[d]}")
    if indirect is not None:
        if strides[0]:
            raise NotImplementedError(f"a tile of indices on {t.describe()} together with an index expression "
                                      "varying along the partition axis: not emulated here")
        strides[0] = t.strides[indirect[0]]
        indirect = (0, indirect[1], False)
    v = NkiTensor(t._alloc, tuple(shape), strides, offset, pdim, t.dtype, indirect)
    if oob:
        v._oob = "; ".join(oob)
        return v
    _check_bounds(v)
    return v


def _dynamic_index(t: NkiTensor, d: int, tile: NkiTensor, indirect, rank: int) -> tuple:
    if t._alloc.on_chip or not tile._alloc.on_chip:
        fail("err_indirect_indices_free_dim", f"indexing {t.describe()} with {tile.describe()}: a tile of indices "
             "addresses an HBM tensor, and must itself be on chip", "nl.load the indices, then index the HBM tensor")
    if indirect is not None or rank == 0:
        fail("err_indirect_indices_free_dim", f"{t.describe()}: one tile of indices per access, with index "
             "expressions (nl.arange / nl.mgrid) for the other dimensions", "index the other dimensions with nl.mgrid")
    return (d, tile)


# -- masks ---------------------------------------------------------------------------------------------------

def restrict(mask, tiles, space=None):
    """Instruction operands restricted to the box where `mask` holds, and the predicate within the box."""
    if isinstance(mask, bool):
        mask = MaskExpr(torch.tensor(mask))
    if not isinstance(mask, MaskExpr):
        fail("err_unsupported_expression_in_mask", f"mask={mask!r} is not a predicate over loop / arange indices",
             "compare affine index expressions, e.g. mask=(i * 128 + i_p < n)")
    ref = space if space is not None else next(t.shape for t in tiles if isinstance(t, NkiTensor))
    m = mask.values
    while m.dim() < len(ref):
        m = m.unsqueeze(-1)
    try:
        m = m.expand(tuple(ref))
    except RuntimeError:
        fail("err_unsupported_expression_in_mask", f"mask of shape {list(mask.values.shape)} does not match the "
             f"instruction's tile shape {list(ref)}", "build the mask from the same indices as the tile")
    box = []
    for a in range(len(ref)):
        other = [i for i in range(len(ref)) if i != a]
        hit = m.any(dim=other) if other else m
        nz = torch.nonzero(hit).reshape(-1)
        box.append((int(nz[0]), int(nz[-1]) + 1) if nz.numel() else (0, 0))
    inner = m[tuple(slice(lo, hi) for lo, hi in box)]
    where = None if bool(inner.all()) else inner
    out = []
    for t in tiles:
        if not isinstance(t, NkiTensor):
            out.append(t)
            continue
        shape, offset = list(t.shape), t.offset
        for a, (lo, hi) in enumerate(box):
            if a < len(shape) and shape[a] == ref[a] and (lo, hi) != (0, ref[a]):
                offset += lo * t.strides[a]
                shape[a] = hi - lo
        v = NkiTensor(t._alloc, shape, t.strides, offset, t.pdim, t.dtype, t._indirect)
        _check_bounds(v)
        out.append(v)
    return out, where


def predicate_values(pred, shape) -> torch.Tensor:
    """A beta-1 affine_select predicate (`pred > 0` for an index expression) as a bool tensor of `shape`."""
    if isinstance(pred, MaskExpr):
        v = pred.values
    elif isinstance(pred, IndexExpr):
        v = pred.values > 0
    else:
        v = torch.tensor(bool(pred))
    while v.dim() < len(shape):
        v = v.unsqueeze(-1)
    return v.expand(tuple(shape))


from ..memory import set_advanced_index_hook  # noqa: E402

set_advanced_index_hook(advanced_index)
