"""Memory accounting of the emulated cores (torch.cuda's memory API)."""

from __future__ import annotations

from typing import Any

from .. import runtime


def _idx(device: Any) -> int:
    from . import _checked, _index
    return _checked(_index(device))


def memory_stats(device: Any = None) -> dict[str, int]:
    s = runtime.memory_stats(_idx(device))
    # Keys as torch.cuda.memory_stats() names them, so tools that read them work unchanged.
    return {
        "allocated_bytes.all.current": s["allocated_bytes"],
        "allocated_bytes.all.peak": s["peak_allocated_bytes"],
        "reserved_bytes.all.current": s["allocated_bytes"],
        "reserved_bytes.all.peak": s["peak_allocated_bytes"],
        "active_bytes.all.current": s["allocated_bytes"],
        "num_alloc_retries": 0,
        "num_ooms": s["num_ooms"],
        "allocation.all.allocated": s["num_allocs"],
        "allocation.all.freed": s["num_frees"],
        "allocation.all.current": s["num_allocs"] - s["num_frees"],
        "allocated_bytes.all.allocated": s["total_allocated_bytes"],
        "allocated_bytes.all.freed": s["total_freed_bytes"],
        "hbm_bytes": s["hbm_bytes"],
    }


def memory_allocated(device: Any = None) -> int:
    return runtime.memory_stats(_idx(device))["allocated_bytes"]


def max_memory_allocated(device: Any = None) -> int:
    return runtime.memory_stats(_idx(device))["peak_allocated_bytes"]


# The emulator does not cache: reserved == allocated.
memory_reserved = memory_allocated
max_memory_reserved = max_memory_allocated


def reset_peak_memory_stats(device: Any = None) -> None:
    runtime.reset_peak(_idx(device))


reset_max_memory_allocated = reset_peak_memory_stats


def reset_accumulated_memory_stats(device: Any = None) -> None:
    from .. import _C
    _C._reset_accumulated(_idx(device))


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the core's HBM, as torch.cuda.mem_get_info; Accelerate sizes device_map="auto" with it."""
    s = runtime.memory_stats(_idx(device))
    return s["hbm_bytes"] - s["allocated_bytes"], s["hbm_bytes"]


def empty_cache() -> None:
    """Nothing is cached: every byte counted is held by a live tensor. (Accelerate calls this per moved
    tensor, so it must be cheap: no gc.collect here.)"""


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    idx = _idx(device)
    s = runtime.memory_stats(idx)
    mib = 1 << 20
    return (f"neuron:{idx} memory: allocated {s['allocated_bytes'] / mib:.1f} MiB, "
            f"peak {s['peak_allocated_bytes'] / mib:.1f} MiB, HBM {s['hbm_bytes'] / mib:.0f} MiB, "
            f"allocations {s['num_allocs']}, frees {s['num_frees']}, OOMs {s['num_ooms']}")
