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
    applied: list[str] = []

    # No open bug at the moment: the two stand-ins the first full run needed
    # (tied parameters across Module.to, integer histc) were removed when the
    # core fixed them (commits 8719653, f839f59). Add the next one here.
    return applied
