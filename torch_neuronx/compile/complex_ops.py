"""Complex ops decomposed into real ones before lowering, as TorchNeuron does (TORCH_NEURONX_COMPLEX_DECOMPOSE).

NeuronCores have no complex datapath and torch-mlir lowers almost no complex op to StableHLO
(view_as_complex, a complex multiply, polar, view_as_real all fail). TorchNeuron "enables framework
decomposition of complex operations before lowering" (TORCH_NEURONX_COMPLEX_DECOMPOSE, on by default
with PyTorch >= 2.13): each complex value becomes a real tensor with a trailing dimension of 2 (real,
imaginary) - the layout of view_as_real - and each complex op the real arithmetic on it. Rotary
embeddings written with complex numbers (Llama's reference code, Qwen-Image, Z-Image) then lower.

`ComplexAsReal` is the interpreter the lowering stage traces a graph through (lowering.py): it keeps a
`Packed` for each complex value and runs these rules; a complex op without a rule raises
`UnsupportedComplexOp`, which the lowering reports as the op that does not lower. With
TORCH_NEURONX_COMPLEX_DECOMPOSE=0 complex ops reach torch-mlir as they are (and fail there).
"""

from __future__ import annotations

import operator
import os
from typing import Any

import torch

aten = torch.ops.aten
prims = torch.ops.prims
SWITCH = "TORCH_NEURONX_COMPLEX_DECOMPOSE"


def enabled() -> bool:
    return os.environ.get(SWITCH, "1").strip().lower() not in ("0", "false", "no")


class UnsupportedComplexOp(Exception):
    def __init__(self, op: str, node: Any = None):
        super().__init__(op)
        self.op = op
        self.node = node


class Packed:
    """A complex tensor as a real one with a trailing (real, imaginary) dimension."""

    def __init__(self, t: torch.Tensor):
        self.t = t

    @property
    def rank(self) -> int:
        return self.t.dim() - 1


_REAL_OF = {torch.complex64: torch.float32, torch.complex128: torch.float64, torch.complex32: torch.float16}


def is_complex_value(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_complex()


def _pack(real: torch.Tensor, imag: torch.Tensor) -> Packed:
    return Packed(torch.stack([real, imag], dim=-1))


def _re(x: Any) -> Any:
    return x.t[..., 0] if isinstance(x, Packed) else (x.real if isinstance(x, complex) else x)


def _im(x: Any) -> Any:
    if isinstance(x, Packed):
        return x.t[..., 1]
    if isinstance(x, complex):
        return x.imag
    return torch.zeros_like(x) if isinstance(x, torch.Tensor) else 0.0


def _dim(d: int, rank: int) -> int:
    """A dimension of the complex tensor, as a dimension of its packed form (negative ones skip the pair)."""
    return d + rank if d < 0 else d


def _mul(a: Any, b: Any) -> Packed:
    if not isinstance(b, (Packed, complex)):
        return Packed(a.t * (b.unsqueeze(-1) if isinstance(b, torch.Tensor) else b))
    if not isinstance(a, (Packed, complex)):
        return _mul(b, a)
    return _pack(_re(a) * _re(b) - _im(a) * _im(b), _re(a) * _im(b) + _im(a) * _re(b))


def _add(a: Any, b: Any, alpha: Any = 1, sign: int = 1) -> Packed:
    return _pack(_re(a) + sign * alpha * _re(b), _im(a) + sign * alpha * _im(b))


def _div(a: Any, b: Any) -> Packed:
    if not isinstance(b, (Packed, complex)):
        return Packed(a.t / (b.unsqueeze(-1) if isinstance(b, torch.Tensor) else b))
    norm = _re(b) * _re(b) + _im(b) * _im(b)
    return _pack((_re(a) * _re(b) + _im(a) * _im(b)) / norm, (_im(a) * _re(b) - _re(a) * _im(b)) / norm)


def _as_packed(x: Any, like: Packed) -> Packed:
    if isinstance(x, Packed):
        return x
    if isinstance(x, torch.Tensor):
        return _pack(x, torch.zeros_like(x))
    value = complex(x)
    return _pack(torch.full_like(like.t[..., 0], value.real), torch.full_like(like.t[..., 0], value.imag))


def _factory(size: Any, value: complex, dtype: torch.dtype, kwargs: dict) -> Packed:
    kwargs = {k: v for k, v in kwargs.items() if k in ("device", "layout", "pin_memory")}
    real = _REAL_OF.get(dtype, torch.float32)
    return _pack(torch.full(size, value.real, dtype=real, **kwargs), torch.full(size, value.imag, dtype=real, **kwargs))


def _identity(x: Any, *args: Any, **kwargs: Any) -> Any:
    return x


def _to(x: Any, *args: Any, dtype: torch.dtype | None = None, **kwargs: Any) -> Any:
    """_to_copy / convert_element_type: complex <-> real (the real part), complex precision kept."""
    if args and isinstance(args[0], torch.dtype):
        dtype = args[0]
    if isinstance(x, Packed):
        if dtype is None or dtype.is_complex:
            return x
        return _re(x).to(dtype)
    if dtype is not None and dtype.is_complex:
        x = x.to(_REAL_OF.get(dtype, torch.float32))
        return _pack(x, torch.zeros_like(x))
    return x


def _sum(x: Packed, dims: Any = None, keepdim: bool = False, dtype: Any = None) -> Packed:
    dims = list(range(x.rank)) if dims is None or dims == [] else [_dim(d, x.rank) for d in dims]
    return Packed(x.t.sum(dims, keepdim=keepdim))


def _cat(tensors: list, dim: int = 0) -> Packed:
    like = next(t for t in tensors if isinstance(t, Packed))
    return Packed(torch.cat([_as_packed(t, like).t for t in tensors], _dim(dim, like.rank)))


def _where(cond: torch.Tensor, a: Any, b: Any) -> Packed:
    like = a if isinstance(a, Packed) else b
    return Packed(torch.where(cond.unsqueeze(-1), _as_packed(a, like).t, _as_packed(b, like).t))


def _scalar_value(x: Any) -> complex:
    return complex(x)


# op -> rule(*args, **kwargs) on Packed / real values. Shape ops keep the trailing pair dimension last.
RULES = {
    aten.view_as_complex.default: lambda x: Packed(x),
    aten.view_as_real.default: lambda p: p.t,
    aten.mul.Tensor: _mul,
    aten.mul.Scalar: _mul,
    aten.add.Tensor: lambda a, b, alpha=1: _add(a, b, alpha),
    aten.add.Scalar: lambda a, b, alpha=1: _add(a, b, alpha),
    aten.sub.Tensor: lambda a, b, alpha=1: _add(a, b, alpha, -1),
    aten.sub.Scalar: lambda a, b, alpha=1: _add(a, b, alpha, -1),
    aten.div.Tensor: _div,
    aten.div.Scalar: _div,
    aten.neg.default: lambda p: Packed(-p.t),
    aten.polar.default: lambda r, theta: _pack(r * torch.cos(theta), r * torch.sin(theta)),
    aten.complex.default: lambda re, im: _pack(re, im),
    aten.real.default: _re,
    aten.imag.default: _im,
    aten.conj_physical.default: lambda p: _pack(_re(p), -_im(p)),
    aten._conj.default: lambda p: _pack(_re(p), -_im(p)),
    aten.conj.default: lambda p: _pack(_re(p), -_im(p)),
    aten._conj_physical.default: lambda p: _pack(_re(p), -_im(p)),
    aten.resolve_conj.default: _identity,
    aten.resolve_neg.default: _identity,
    aten.abs.default: lambda p: torch.sqrt(_re(p) * _re(p) + _im(p) * _im(p)),
    aten.angle.default: lambda p: torch.atan2(_im(p), _re(p)),
    aten.exp.default: lambda p: _pack(torch.exp(_re(p)) * torch.cos(_im(p)), torch.exp(_re(p)) * torch.sin(_im(p))),
    aten.clone.default: lambda p, **kw: Packed(p.t.clone()),
    aten.alias.default: _identity,
    aten.lift_fresh_copy.default: _identity,
    aten.copy.default: lambda dst, src, non_blocking=False: _as_packed(src, dst) if isinstance(dst, Packed) else src,
    prims.device_put.default: _identity,
    aten._to_copy.default: _to,
    prims.convert_element_type.default: _to,
    aten.view.default: lambda p, shape: Packed(p.t.reshape([*shape, 2])),
    aten._unsafe_view.default: lambda p, shape: Packed(p.t.reshape([*shape, 2])),
    aten.reshape.default: lambda p, shape: Packed(p.t.reshape([*shape, 2])),
    aten.expand.default: lambda p, shape, implicit=False: Packed(p.t.expand([*shape, 2])),
    aten.permute.default: lambda p, dims: Packed(p.t.permute([_dim(d, p.rank) for d in dims] + [p.rank])),
    aten.transpose.int: lambda p, a, b: Packed(p.t.transpose(_dim(a, p.rank), _dim(b, p.rank))),
    aten.unsqueeze.default: lambda p, d: Packed(p.t.unsqueeze(_dim(d, p.rank + 1))),
    aten.squeeze.dim: lambda p, d: Packed(p.t.squeeze(_dim(d, p.rank))),
    aten.squeeze.dims: lambda p, ds: Packed(p.t.squeeze([_dim(d, p.rank) for d in ds])),
    aten.slice.Tensor: lambda p, dim=0, start=None, end=None, step=1:
        Packed(aten.slice.Tensor(p.t, _dim(dim, p.rank), start, end, step)),
    aten.select.int: lambda p, dim, index: Packed(p.t.select(_dim(dim, p.rank), index)),
    aten.slice_scatter.default: lambda p, src, dim=0, start=None, end=None, step=1: Packed(aten.slice_scatter.default(
        _as_packed(p, src).t, _as_packed(src, p).t, _dim(dim, p.rank if isinstance(p, Packed) else p.dim()),
        start, end, step)),
    aten.select_scatter.default: lambda p, src, dim, index: Packed(aten.select_scatter.default(
        _as_packed(p, src).t, _as_packed(src, p).t, _dim(dim, p.rank if isinstance(p, Packed) else p.dim()), index)),
    aten.index.Tensor: lambda p, indices: Packed(aten.index.Tensor(p.t, indices)),
    aten.cat.default: _cat,
    aten.split_with_sizes.default: lambda p, sizes, dim=0: [Packed(t) for t in p.t.split(list(sizes), _dim(dim, p.rank))],
    aten.split.Tensor: lambda p, size, dim=0: [Packed(t) for t in p.t.split(size, _dim(dim, p.rank))],
    aten.unbind.int: lambda p, dim=0: [Packed(t) for t in p.t.unbind(_dim(dim, p.rank))],
    operator.getitem: lambda values, i: values[i],
    aten.where.self: _where,
    aten.sum.dim_IntList: _sum,
    aten.sum.default: lambda p, dtype=None: _sum(p),
    aten.repeat.default: lambda p, sizes: Packed(p.t.repeat([*sizes, 1])),
    aten.flip.default: lambda p, dims: Packed(p.t.flip([_dim(d, p.rank) for d in dims])),
    aten.constant_pad_nd.default: lambda p, pad, value=0: Packed(aten.constant_pad_nd.default(p.t, [0, 0, *pad], 0)),
}

# Factories of complex tensors: (size, value) from their arguments.
FACTORIES = {
    aten.full.default: lambda size, value, **kw: (size, complex(value), kw),
    aten.zeros.default: lambda size, **kw: (size, 0j, kw),
    aten.ones.default: lambda size, **kw: (size, 1 + 0j, kw),
    aten.empty.memory_format: lambda size, **kw: (size, 0j, kw),
    aten.scalar_tensor.default: lambda value, **kw: ([], complex(value), kw),
}


def op_name(target: Any) -> str:
    return f"{target.namespace}.{target._opname}" if isinstance(target, torch._ops.OpOverload) else str(target)


class ComplexAsReal:
    """Mixin for a torch.fx.Interpreter: complex values as Packed, complex ops by RULES."""

    def placeholder(self, target, args, kwargs):
        value = super().placeholder(target, args, kwargs)
        return Packed(value) if self._packed_inputs.get(target) else value

    def call_function(self, target, args, kwargs):
        flat = list(args) + list(kwargs.values())
        flat += [v for a in flat if isinstance(a, (list, tuple)) for v in a]
        makes_complex = is_complex_value(self._current.meta.get("val")) if self._current is not None else False
        if not makes_complex and not any(isinstance(a, Packed) for a in flat):
            return super().call_function(target, args, kwargs)
        if target in FACTORIES and makes_complex:
            size, value, kw = FACTORIES[target](*args, **kwargs)
            return _factory(size, value, kw.get("dtype") or torch.complex64, kw)
        rule = RULES.get(target)
        if rule is None:
            raise UnsupportedComplexOp(op_name(target), self._current)
        return rule(*args, **kwargs)

    def run_node(self, n):
        self._current = n
        try:
            return super().run_node(n)
        finally:
            self._current = None

    def output(self, target, args, kwargs):
        values = args[0]
        if isinstance(values, (list, tuple)):
            return type(values)(v.t if isinstance(v, Packed) else v for v in values)
        return values.t if isinstance(values, Packed) else values
