"""Neuron's data-type rules on `neuron`, and their switches (docs/fidelity.md).

NeuronCores (v2/v3) compute in fp32, tf32, bf16, fp16, fp8, uint8 and int32:
there is no int64 and no fp64 datapath. TorchNeuron stores int64 tensors as
int32 and float64 as float32, and matmul, scatter-add, all-reduce and
reduce-scatter compute integers in fp32, exact only up to 2^24. A job whose
integers leave those ranges is silently wrong on Trainium; the emulator says so
at the op that produced the value (C++: csrc/aten/native/NeuronDtypeRules.cpp).

TORCHNEURON_INT64
    warn (default)   an int64 result outside int32, or an integer result of matmul / scatter-add /
                     index_add / sum / cumsum / a reducing collective beyond 2^24 in magnitude, is
                     reported by a warning at that op (once per op), naming the op, the value and the
                     fix; values stay exact
    error            the same message raised at the op: stops at every such op (to find them all)
    exact            host int64 semantics, no checks (the job may still be wrong on Trainium)

    Why warn and not error by default: such a value is wrong on Trainium only if it is used, and
    working models make them and throw them away. T5's relative-position buckets cast log(0) = -inf
    to int64 (INT64_MIN on the host, truncated on Neuron) and torch.where discards it; T5 runs on
    Trainium, so it must run here (every T5-conditioned Diffusers pipeline, Flux and SD3 among them).

TORCHNEURON_FP64
    float32 (default)  every float64 result on neuron is rounded to float32 precision (still dtype
                       float64), as Trainium stores it; a warning names the first float64 op once
    exact              host float64 precision (the emulator's behaviour before this rule)
    warn               exact, with a warning at the first float64 op
    error              any float64 op on neuron raises (find every one)
    allow              deprecated alias of `exact` (one release)

NEURON_RT_STOCHASTIC_ROUNDING_EN
    0 (default)  fp32 -> bf16 conversions on the device round to nearest even
    1            they round stochastically, with bits from the core's RNG (torch.manual_seed /
                 torch.neuron.manual_seed make it reproducible)
    A runtime variable: runtime/topology.py validates it with the others (another value is a
    TopologyError at first device use) and the runtime applies it when it starts.

The defaults make a job that would be wrong on Trainium say so here first (fp64:
the same rounding as on Trainium; int64: a warning at the op) without stopping a
job that runs on Trainium. The checks only look at integer and float64 results, so float
training pays nothing for them.
"""

from __future__ import annotations

import os
import warnings

from . import _C

_FP64_MODES = {"exact": 0, "warn": 1, "error": 2, "float32": 3}
_FP64_DEPRECATED = {"allow": "exact"}
_INT64_MODES = {"exact": 0, "error": 1, "warn": 2}
DEFAULT_FP64 = "float32"
DEFAULT_INT64 = "warn"


def set_fp64_mode(mode: str) -> None:
    """float32 (default), exact, warn or error: see the module docstring (TORCHNEURON_FP64)."""
    mode = _fp64_alias(mode)
    if mode not in _FP64_MODES:
        raise ValueError(f"fp64 mode {mode!r}: choose one of {sorted(_FP64_MODES)}")
    _C._set_fp64_mode(_FP64_MODES[mode])


def set_int64_mode(mode: str) -> None:
    """warn (default), error or exact: see the module docstring (TORCHNEURON_INT64)."""
    if mode not in _INT64_MODES:
        raise ValueError(f"int64 mode {mode!r}: choose one of {sorted(_INT64_MODES)}")
    _C._set_int64_mode(_INT64_MODES[mode])


def set_stochastic_rounding(enabled: bool) -> None:
    """What NEURON_RT_STOCHASTIC_ROUNDING_EN=1 turns on when the runtime starts (runtime/emulator.py)."""
    _C._set_stochastic_rounding(bool(enabled))


def _fp64_alias(mode: str) -> str:
    if mode in _FP64_DEPRECATED:
        new = _FP64_DEPRECATED[mode]
        warnings.warn(f"TORCHNEURON_FP64={mode!r} is deprecated and will be removed in the next release; "
                      f"use {new!r} (same behaviour)", DeprecationWarning, stacklevel=3)
        return new
    return mode


def _env_choice(name: str, modes: dict, default: str) -> str:
    value = os.environ.get(name, default).strip().lower() or default
    if name == "TORCHNEURON_FP64":
        value = _fp64_alias(value)
    if value not in modes:  # a warning, not an error: `import torch` loads this module
        warnings.warn(f"{name}={value!r} is not one of {', '.join(sorted(modes))}; using {default!r}")
        value = default
    return value


def _from_env() -> None:
    set_fp64_mode(_env_choice("TORCHNEURON_FP64", _FP64_MODES, DEFAULT_FP64))
    set_int64_mode(_env_choice("TORCHNEURON_INT64", _INT64_MODES, DEFAULT_INT64))
    # NEURON_RT_STOCHASTIC_ROUNDING_EN is a runtime variable: runtime/topology.py parses and validates
    # it with the others, and the runtime applies it through set_stochastic_rounding().


_from_env()
