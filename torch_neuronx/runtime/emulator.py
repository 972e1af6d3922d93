"""The emulator backend of the runtime seam: cores are budgets over host RAM."""

from __future__ import annotations

from .topology import Topology


def _core():
    from .. import _C
    return _C


def configure(topo: Topology) -> None:
    _core()._configure([topo.hbm_per_core] * topo.device_count,
                       [topo.label(i) for i in range(topo.device_count)])


def mark_unavailable(reason: str) -> None:
    _core()._set_unavailable(reason)


def memory_stats(device: int) -> dict:
    """allocated/peak bytes, alloc/free/OOM counts and the core's HBM budget."""
    return _core()._memory_stats(device)


def reset_peak(device: int) -> None:
    _core()._reset_peak(device)


def synchronize(device: int) -> None:
    _core()._synchronize(device)
