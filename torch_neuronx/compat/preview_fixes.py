"""Preview of plugin fixes not yet in csrc/, to see which failures hide behind them.

TORCHNEURON_COMPAT_PREVIEW_FIXES=1 applies, inside each worker, a Python
stand-in for each plugin bug reported to the core owner. A run with it answers
"once these bugs are fixed, what fails next?" without waiting for the fix. Its
numbers are a preview, never the matrix: the report says so in its header, and
docs/compat.md holds the run without it. Remove a stand-in when its fix lands.
"""

from __future__ import annotations

import os

ENV = "TORCHNEURON_COMPAT_PREVIEW_FIXES"


def enabled() -> bool:
    return os.environ.get(ENV, "") == "1"


def apply() -> list[str]:
    """Install the stand-ins; returns their names (recorded in the result)."""
    import torch
    applied = []

    # Bug: torch.histc on an integer neuron tensor fails (the host kernel has
    # no Int version; CUDA has one, and Transformers' MoE routing uses it on
    # every non-CPU device). Stand-in: count in float, as on CPU.
    histc = torch.histc

    def histc_int(input, bins=100, min=0, max=0, *, out=None):  # noqa: A002 - torch's signature
        if input.device.type == "neuron" and not input.is_floating_point() and out is None:
            return histc(input.float(), bins=bins, min=min, max=max).to(input.dtype)
        return histc(input, bins=bins, min=min, max=max, out=out) if out is not None else \
            histc(input, bins=bins, min=min, max=max)

    torch.histc = histc_int
    applied.append("histc-int")
    return applied
