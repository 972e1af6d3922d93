"""NKI's data types, how each is stored here, and the one rounding every engine result gets.

NKI names its dtypes `nl.float32`, `nl.bfloat16`, ... (NKI 0.3+: its own DType objects; beta 1: NumPy dtypes).
A `DType` here compares equal to its NKI name, its NumPy dtype and its torch dtype, so kernels written for
either API (`x.dtype == np.float32`, `dtype=nl.bfloat16`, `dtype=torch.float16`) work unchanged.

Numerics (aws-neuron-sdk nki/api/nki.api.shared.rst, about-neuron/arch/neuron-features/rounding-modes.rst):
engines compute in fp32 and round once to the destination dtype, round-to-nearest-even; fp32 -> integer
casts round to nearest even and saturate. Storage: every dtype torch has is stored as itself; `tfloat32` as
fp32 rounded to its 10-bit mantissa; Neuron's legacy `float8_e4m3` (IEEE-style, max 240) in torch's
float8_e4m3fn bytes after saturating to +-240 (their encodings agree up to 240).
Not emulated: the packed x4 types (float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4) of NeuronCore-v4's MX
matmul: using one raises, naming it.
"""

from __future__ import annotations

import numpy as np
import torch


class DType:
    """An NKI dtype: its name, the torch dtype that stores it, and its size in bytes."""

    __slots__ = ("name", "storage", "itemsize", "kind", "_np")

    def __init__(self, name: str, storage: torch.dtype, kind: str, np_name: str | None = None):
        self.name = name
        self.storage = storage
        self.itemsize = torch.empty((), dtype=storage).element_size()
        self.kind = kind  # "f" float, "i" signed int, "u" unsigned int, "b" bool
        self._np = np_name

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def dtype(self):
        """The NumPy dtype (np.dtype(nl.float32) works); None where NumPy has none (bfloat16, fp8)."""
        return np.dtype(self._np) if self._np else None

    def __eq__(self, other) -> bool:
        if isinstance(other, DType):
            return other.name == self.name
        found = _find(other)
        return found is not None and found.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__


def _d(name, storage, kind, np_name=None):
    return DType(name, storage, kind, np_name)


bool_ = _d("bool", torch.bool, "b", "bool")
int8 = _d("int8", torch.int8, "i", "int8")
int16 = _d("int16", torch.int16, "i", "int16")
int32 = _d("int32", torch.int32, "i", "int32")
uint8 = _d("uint8", torch.uint8, "u", "uint8")
uint16 = _d("uint16", torch.uint16, "u", "uint16")
uint32 = _d("uint32", torch.uint32, "u", "uint32")
float16 = _d("float16", torch.float16, "f", "float16")
bfloat16 = _d("bfloat16", torch.bfloat16, "f")
float32 = _d("float32", torch.float32, "f", "float32")
tfloat32 = _d("tfloat32", torch.float32, "f")
float8_e4m3 = _d("float8_e4m3", torch.float8_e4m3fn, "f")
float8_e4m3fn = _d("float8_e4m3fn", torch.float8_e4m3fn, "f")
float8_e5m2 = _d("float8_e5m2", torch.float8_e5m2, "f")
float8_e8m0fnu = _d("float8_e8m0fnu", torch.float8_e8m0fnu, "f")

ALL = [bool_, int8, int16, int32, uint8, uint16, uint32, float16, bfloat16, float32, tfloat32, float8_e4m3,
       float8_e4m3fn, float8_e5m2, float8_e8m0fnu]
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"bool_": bool_, "fp32": float32, "fp16": float16, "bf16": bfloat16, "float": float32})
_BY_TORCH = {torch.bool: bool_, torch.int8: int8, torch.int16: int16, torch.int32: int32, torch.uint8: uint8,
             torch.uint16: uint16, torch.uint32: uint32, torch.float16: float16, torch.bfloat16: bfloat16,
             torch.float32: float32, torch.float8_e4m3fn: float8_e4m3fn, torch.float8_e5m2: float8_e5m2,
             torch.float8_e8m0fnu: float8_e8m0fnu}
_PY = {float: float32, int: int32, bool: bool_}
PACKED = ("float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4")
_NO_DATAPATH = {"int64": "int32", "uint64": "uint32", "float64": "float32", "double": "float32", "long": "int32"}


def _find(x) -> DType | None:
    if isinstance(x, DType):
        return x
    if isinstance(x, torch.dtype):
        return _BY_TORCH.get(x)
    if isinstance(x, type) and x in _PY:
        return _PY[x]
    if isinstance(x, str):
        return _BY_NAME.get(x)
    try:
        name = np.dtype(x).name
    except TypeError:
        return None
    return _BY_NAME.get(name)


def lookup(x, what: str = "dtype") -> DType:
    """The NKI dtype for an NKI / NumPy / torch dtype or its name; a clear error for the ones Neuron lacks."""
    found = _find(x)
    if found is not None:
        return found
    name = str(x).replace("torch.", "").replace("<class 'numpy.", "").rstrip("'>")
    if name in PACKED:
        raise NotImplementedError(
            f"{what} {name}: the packed x4 dtypes of NeuronCore-v4's MX matmul are not emulated here "
            "(docs/nki.md). Use float8_e4m3fn / float8_e5m2 / bfloat16 tiles.")
    for bad, good in _NO_DATAPATH.items():
        if bad in name:
            raise TypeError(f"{what} {name}: NeuronCores have no {bad} datapath; NKI has no such dtype. "
                            f"Convert to {good} before calling the kernel (x.to(torch.{good})).")
    raise TypeError(f"{what} {x!r} is not an NKI dtype. Use one of nl.{', nl.'.join(d.name for d in ALL)}.")


def of_torch(t: torch.Tensor) -> DType:
    return lookup(t.dtype, "tensor dtype")


# -- the one rounding -------------------------------------------------------------------------------------

_INT_RANGE = {d.name: (torch.iinfo(d.storage).min, torch.iinfo(d.storage).max)
              for d in (int8, int16, int32, uint8, uint16, uint32)}


def _round_tf32(x: torch.Tensor) -> torch.Tensor:
    """fp32 rounded to tf32's 10-bit mantissa, nearest even (NaN and inf unchanged)."""
    bits = x.view(torch.int32)
    lsb = (bits >> 13) & 1
    rounded = ((bits + 0xFFF + lsb) & ~0x1FFF).view(torch.float32)
    return torch.where(torch.isfinite(x), rounded, x)


def round_to(x: torch.Tensor, dtype: DType) -> torch.Tensor:
    """A computed tile (fp32, or exact integers) stored as `dtype`: one round-to-nearest-even conversion."""
    if dtype.kind == "f":
        if dtype is tfloat32:
            return _round_tf32(x.to(torch.float32))
        if dtype is float8_e4m3:
            x = x.to(torch.float32).clamp(-240.0, 240.0)
        return x.to(dtype.storage)
    if dtype.kind == "b":
        return x != 0
    lo, hi = _INT_RANGE[dtype.name]
    if x.is_floating_point():
        x = torch.nan_to_num(x.to(torch.float32).round(), nan=0.0).clamp(float(lo), float(hi))
        return x.to(torch.int64).clamp(lo, hi).to(dtype.storage)
    return x.to(torch.int64).clamp(lo, hi).to(dtype.storage)


def to_compute(x: torch.Tensor) -> torch.Tensor:
    """A stored tile as the engines see it: fp32 (integers above 2^24 lose bits, as on the hardware)."""
    return x if x.dtype == torch.float32 else x.to(torch.float32)


def promote(a: DType, b: DType) -> DType:
    """NKI's type promotion for two tiles (nki/api/nki.api.shared.rst @beta "NKI Type Promotion")."""
    if a == b:
        return a
    if a.is_float and b.is_float:
        if a.itemsize != b.itemsize:
            return a if a.itemsize > b.itemsize else b
        return float32 if a.itemsize == 2 else bfloat16  # (fp16, bf16) -> fp32; (fp8, fp8) -> bf16
    if a.is_float or b.is_float:
        return a if a.is_float else b
    if a.kind == b.kind or bool_ in (a, b):
        return a if a.itemsize >= b.itemsize else b
    signed, unsigned = (a, b) if a.kind == "i" else (b, a)
    if signed.itemsize > unsigned.itemsize:
        return signed
    return {1: int16, 2: int32}.get(unsigned.itemsize, float32)  # (int32, uint32) -> fp32


def nan_fill(dtype: DType):
    """What fresh on-chip memory holds here: NaN for floats (a read of it shows), as AWS's simulator does."""
    if dtype.is_float and dtype is not float8_e8m0fnu:
        return float("nan")
    if dtype.kind == "b":
        return True
    return 4  # AWS's simulator's integer poison value (nki/guides/nki_simulator.rst)
