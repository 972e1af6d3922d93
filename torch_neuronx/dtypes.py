"""Neuron dtype rules.

NeuronCores compute in bf16/fp16/fp32 (and fp8 on v3); they have no fp64
engines: on Neuron, float64 ops do not run on the compute engines but on the
host fallback. The emulator does the same (TORCHNEURON_FP64=allow, the
default: stored on the device, computed on the host in full precision, as
PyTorch itself does when it prints a tensor). TORCHNEURON_FP64=warn warns
once per process; TORCHNEURON_FP64=error (strict mode) rejects any float64 op
on the device, to find code that would be slow on real hardware.
"""

from __future__ import annotations

import os
import warnings

from . import _C

_MODES = {"allow": 0, "warn": 1, "error": 2}


def set_fp64_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"fp64 mode {mode!r}: choose one of {sorted(_MODES)}")
    _C._set_fp64_mode(_MODES[mode])


def _from_env() -> None:
    mode = os.environ.get("TORCHNEURON_FP64", "allow").strip().lower()
    if mode not in _MODES:  # a warning, not an error: `import torch` loads this module
        warnings.warn(f"TORCHNEURON_FP64={mode!r} is not one of allow, warn, error; using 'allow'")
        mode = "allow"
    set_fp64_mode(mode)


_from_env()
