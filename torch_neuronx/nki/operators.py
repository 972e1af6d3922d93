"""The operators NKI instructions take as `op=`: their fp32 arithmetic on whole tiles.

Kernels name an operator with an `nki.language` function (`nl.add`, `nl.exp`, `nl.maximum`; each carries its
operator name in `_nki_op`) or, in beta-1 kernels, a NumPy function (`np.add`, `np.max`, `np.exp`).
ScalarE's activation functions are piece-wise approximations on hardware (aws-neuron-sdk
nki/api/nki.api.shared.rst "Supported Activation Functions"); here they are torch's fp32 functions, so
results can differ from a device in the last bits (see docs/nki.md).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .errors import fail

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


def _gelu_dx(x):
    cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
    return cdf + x * torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _silu_dx(x):
    s = torch.sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def _sig_gelu_dx(x):
    s = torch.sigmoid(1.702 * x)
    return s + 1.702 * x * s * (1.0 - s)


UNARY = {
    "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": lambda x: torch.nn.functional.gelu(x),
    "gelu_apprx_tanh": _gelu_tanh, "gelu_apprx_sigmoid": lambda x: x * torch.sigmoid(1.702 * x),
    "gelu_dx": _gelu_dx, "gelu_apprx_sigmoid_dx": _sig_gelu_dx, "silu": torch.nn.functional.silu,
    "silu_dx": _silu_dx, "softplus": torch.nn.functional.softplus,
    "mish": lambda x: x * torch.tanh(torch.nn.functional.softplus(x)), "erf": torch.erf,
    "erf_dx": lambda x: (2.0 / math.sqrt(math.pi)) * torch.exp(-x * x), "reciprocal": torch.reciprocal,
    "copy": lambda x: x, "bypass": lambda x: x, "identity": lambda x: x, "square": torch.square,
    "abs": torch.abs, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "arctan": torch.atan,
    "sign": torch.sign, "negative": torch.neg, "ceil": torch.ceil, "floor": torch.floor, "trunc": torch.trunc,
    "logical_not": lambda x: (x == 0).to(x.dtype),
}


def _f(b):
    return lambda x, y: b(x, y).to(torch.float32)


def _ints(b):
    """A bitwise operator: on the operands' integer values."""
    def op(x, y):
        return b(x.to(torch.int64), y.to(torch.int64) if isinstance(y, torch.Tensor) else int(y))
    return op


BINARY = {
    "add": torch.add, "subtract": torch.sub, "multiply": torch.mul, "divide": torch.div,
    "maximum": torch.maximum, "minimum": torch.minimum, "power": torch.pow,
    "abs_max": lambda x, y: torch.where(x.abs() > y.abs(), x, y),
    "abs_min": lambda x, y: torch.where(x.abs() < y.abs(), x, y),
    "fmod": torch.fmod, "mod": torch.remainder,
    "equal": _f(torch.eq), "not_equal": _f(torch.ne), "less": _f(torch.lt), "less_equal": _f(torch.le),
    "greater": _f(torch.gt), "greater_equal": _f(torch.ge),
    "logical_and": _f(lambda x, y: (x != 0) & (y != 0)), "logical_or": _f(lambda x, y: (x != 0) | (y != 0)),
    "logical_xor": _f(lambda x, y: (x != 0) ^ (y != 0)),
    "bitwise_and": _ints(torch.bitwise_and), "bitwise_or": _ints(torch.bitwise_or),
    "bitwise_xor": _ints(torch.bitwise_xor), "left_shift": _ints(torch.bitwise_left_shift),
    "right_shift": _ints(torch.bitwise_right_shift),
}
INTEGER_OPS = {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"}

# reductions along free axes, by the binary operator that combines elements
REDUCE = {
    "add": lambda x, dims, keep: x.sum(dim=dims, keepdim=keep),
    "maximum": lambda x, dims, keep: x.amax(dim=dims, keepdim=keep),
    "minimum": lambda x, dims, keep: x.amin(dim=dims, keepdim=keep),
    "multiply": lambda x, dims, keep: x.prod(dim=dims[0], keepdim=keep) if len(dims) == 1 else
    x.flatten(dims[0], dims[-1]).prod(dim=dims[0], keepdim=False),
    "mean": lambda x, dims, keep: x.mean(dim=dims, keepdim=keep),
    "logical_and": lambda x, dims, keep: (x != 0).all(dim=dims[0], keepdim=keep).float(),
    "logical_or": lambda x, dims, keep: (x != 0).any(dim=dims[0], keepdim=keep).float(),
}

_NUMPY = {
    np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide",
    np.maximum: "maximum", np.minimum: "minimum", np.max: "maximum", np.amax: "maximum", np.min: "minimum",
    np.amin: "minimum", np.sum: "add", np.prod: "multiply", np.mean: "mean", np.power: "power",
    np.exp: "exp", np.log: "log", np.sqrt: "sqrt", np.tanh: "tanh", np.abs: "abs", np.negative: "negative",
    np.square: "square", np.reciprocal: "reciprocal", np.sin: "sin", np.cos: "cos", np.tan: "tan",
    np.arctan: "arctan", np.sign: "sign", np.ceil: "ceil", np.floor: "floor", np.trunc: "trunc",
    np.equal: "equal", np.not_equal: "not_equal", np.less: "less", np.less_equal: "less_equal",
    np.greater: "greater", np.greater_equal: "greater_equal", np.logical_and: "logical_and",
    np.logical_or: "logical_or", np.logical_xor: "logical_xor", np.logical_not: "logical_not",
    np.bitwise_and: "bitwise_and", np.bitwise_or: "bitwise_or", np.bitwise_xor: "bitwise_xor",
    np.left_shift: "left_shift", np.right_shift: "right_shift", np.fmod: "fmod", np.mod: "mod",
    np.all: "logical_and", np.any: "logical_or",
}


def name_of(op, what: str = "op") -> str:
    """The operator name of an nl function, a NumPy function or a name string."""
    name = getattr(op, "_nki_op", None)
    if name is None:
        try:
            name = _NUMPY.get(op)
        except TypeError:
            name = None
    if name is None and isinstance(op, str):
        name = op
    if name is None:
        fail("err_unsupported_operator", f"{what}={op!r} is not an NKI operator",
             "pass an nki.language function (nl.add, nl.multiply, nl.exp, nl.maximum, ...)")
    return name


def _lookup(table: dict, op, what: str, kind: str, fix: str):
    name = name_of(op, what)
    fn = table.get(name)
    if fn is None:
        fail("err_unsupported_operator", f"{what}={name} is not {kind}", fix)
    return name, fn


def unary(op, what: str = "op"):
    return _lookup(UNARY, op, what, "an activation (unary) function", "use nl.exp, nl.tanh, nl.gelu, nl.copy, ...")


def binary(op, what: str = "op"):
    return _lookup(BINARY, op, what, "a binary operator",
                   "use nl.add, nl.subtract, nl.multiply, nl.divide, nl.maximum, nl.minimum, comparisons, bitwise ops")


def reduction(op, what: str = "op"):
    return _lookup(REDUCE, op, what, "a reduction", "reduce with nl.add, nl.maximum, nl.minimum, nl.multiply")
