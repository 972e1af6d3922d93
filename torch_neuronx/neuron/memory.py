"""Memory accounting of the emulated cores (torch.cuda's memory API)."""

from __future__ import annotations

import sys
from typing import Any

from .. import runtime


def _idx(device: Any) -> int:
    from . import _checked, _index
    return _checked(_index(device))


def memory_stats(device: Any = None) -> dict[str, int]:
    """torch.cuda.memory_stats() keys, so tools that read them work unchanged.

    The emulator does not split blocks and its cache of freed host blocks is counted on no core: each
    allocation is its own segment, so reserved ==
    active == requested == allocated bytes, segments == allocations, and nothing is non-releasable.
    It has no small/large pools either: only the "all" keys exist.
    """
    s = runtime.memory_stats(_idx(device))
    out: dict[str, int] = {}

    def stat(name: str, current: int, peak: int, allocated: int, freed: int) -> None:
        for key, value in (("current", current), ("peak", peak), ("allocated", allocated), ("freed", freed)):
            out[f"{name}.all.{key}"] = value

    for name in ("allocated_bytes", "active_bytes", "requested_bytes", "reserved_bytes"):
        stat(name, s["allocated_bytes"], s["peak_allocated_bytes"], s["total_allocated_bytes"], s["total_freed_bytes"])
    for name in ("allocation", "active", "segment"):
        stat(name, s["live_allocs"], s["peak_live_allocs"], s["num_allocs"], s["num_frees"])
    for name in ("inactive_split_bytes", "inactive_split"):
        stat(name, 0, 0, 0, 0)
    out.update({"num_alloc_retries": 0, "num_ooms": s["num_ooms"], "num_sync_all_streams": 0,
                "num_device_alloc": s["num_allocs"], "num_device_free": s["num_frees"],
                "hbm_bytes": s["hbm_bytes"]})
    return out


def memory_allocated(device: Any = None) -> int:
    return runtime.memory_stats(_idx(device))["allocated_bytes"]


def max_memory_allocated(device: Any = None) -> int:
    return runtime.memory_stats(_idx(device))["peak_allocated_bytes"]


# Every byte counted on a core is held by a live tensor (the emulator's cache of freed host blocks is
# counted on none: csrc/runtime/HostBlockCache.h), so reserved == allocated.
memory_reserved = memory_allocated
max_memory_reserved = max_memory_allocated


def reset_peak_memory_stats(device: Any = None) -> None:
    runtime.reset_peak(_idx(device))


reset_max_memory_allocated = reset_peak_memory_stats


def reset_accumulated_memory_stats(device: Any = None) -> None:
    from .. import _C
    _C._reset_accumulated(_idx(device))


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the core's HBM, as torch.cuda.mem_get_info; Accelerate sizes device_map="auto" with it.

    At LNC=1 on Trainium2/3 two cores share a bank: total is the bank, free what both leave."""
    s = runtime.memory_stats(_idx(device))
    return s["hbm_bytes"] - s["bank_allocated_bytes"], s["hbm_bytes"]


def empty_cache() -> None:
    """Returns the emulator's cached freed blocks to the host, as torch.cuda.empty_cache returns its
    cache to the GPU. The counts do not change: no core counts the cache. (Accelerate calls this per
    moved tensor, so it must be cheap: no gc.collect here; an empty cache costs one lock.)"""
    runtime.empty_cache()


def _format_size(size: int, pref: float) -> str:
    prefix = "B  "
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        if pref < 768 * 1024:
            break
        prefix, size, pref = unit, size // 1024, pref / 1024
    return f"{size:6d} {prefix}"


def _format_count(count: int, pref: float) -> str:
    prefix = " "
    for unit in ("K", "M"):
        if pref < 750 * 1000:
            break
        prefix, count, pref = unit, count // 1000, pref / 1000
    return f"{count:7d} {prefix} "


_SUMMARY_ROWS = (
    ("allocated_bytes", "Allocated memory", _format_size),
    ("active_bytes", "Active memory", _format_size),
    ("requested_bytes", "Requested memory", _format_size),
    ("reserved_bytes", "HBM reserved memory", _format_size),
    ("inactive_split_bytes", "Non-releasable memory", _format_size),
    ("allocation", "Allocations", _format_count),
    ("active", "Active allocs", _format_count),
    ("segment", "HBM reserved segments", _format_count),
    ("inactive_split", "Non-releasable allocs", _format_count),
)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """The table torch.cuda.memory_summary() prints, from this core's allocator statistics.

    Same columns (current, peak, total allocated, total freed) and rows; the emulator has no small/large
    pools, so each metric has its "all" row only (`abbreviated` changes nothing), and a footer gives the
    core's HBM budget and what is free of it.
    """
    idx = _idx(device)
    stats = memory_stats(idx)
    width = 75
    lines = ["=" * width,
             f"{'':16} PyTorch Neuron memory summary, device ID {idx:<15d} ",
             "-" * width,
             f"  {'':9} Neuron OOMs: {stats['num_ooms']:<12d} | {'':6} alloc retries: {stats['num_alloc_retries']:<11d}  ",
             "=" * width,
             "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  "]
    for key, name, fmt in _SUMMARY_ROWS:
        cur, peak, alloc, freed = (stats[f"{key}.all.{k}"] for k in ("current", "peak", "allocated", "freed"))
        lines.append("-" * width)
        lines.append(f" {name:<21} | {fmt(cur, cur)} | {fmt(peak, peak)} | {fmt(alloc, alloc)} | {fmt(freed, freed)} ")
    hbm, used = stats["hbm_bytes"], stats["allocated_bytes.all.current"]
    lines.append("-" * width)
    lines.append(f" {'HBM budget / free':<21} | {_format_size(hbm, hbm)} | {_format_size(hbm - used, hbm - used)} |"
                 f" {'':10} | {'':10} ")
    lines.append("=" * width)
    return "|" + "|\n|".join(line.ljust(width) for line in lines) + "|\n"


# --- Memory history and snapshots (torch.cuda.memory's private API, which PyTorch's tools call) ---------


def _record_memory_history(enabled: str | None = "all", context: str | None = "all", stacks: str = "all",
                           max_entries: int = sys.maxsize, device: Any = None) -> None:
    """Start (or stop, with enabled=None) recording device memory events with their stacks, as
    torch.cuda.memory._record_memory_history. Recording covers every core of this process (`device` is
    accepted for CUDA's signature); off, the allocator pays one atomic load per allocation.

    enabled: "all" keeps the alloc/free trace (up to max_entries events, oldest dropped first); "state"
    keeps only the stacks of live allocations. context: "all" gathers a stack on free as well as on
    allocation; "alloc" or "state" on allocation only; None gathers none. stacks: "python" or "all"
    (Python and C++ frames).
    """
    from .. import _C
    if enabled not in (None, "state", "all"):
        raise ValueError(f"enabled={enabled!r}: use None, 'state' or 'all'")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"context={context!r}: use None, 'state', 'alloc' or 'all'")
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks={stacks!r}: use 'python' or 'all'")
    if device is not None:
        _idx(device)  # a bad device is an error, as on CUDA
    if enabled is None:
        _C._memory_history_disable()
        return
    _C._memory_history_enable(enabled == "all", context is not None, context == "all", stacks == "all",
                              min(max_entries, sys.maxsize))


def _snapshot(device: Any = None) -> dict:
    """The allocator's state and recorded trace in torch.cuda.memory._snapshot()'s format: "segments"
    (every live allocation of every core, tagged with its device; the emulator counts no cached block, so
    each is a segment holding one active block) and "device_traces" (one list of events per core: segment_alloc,
    alloc, free_requested, free_completed, segment_free, oom; each with addr, size, time_us and frames).
    """
    from .. import _C
    if device is not None:
        _idx(device)
    snap = _C._memory_snapshot()
    snap["allocator_settings"] = {"PYTORCH_NEURON_ALLOC_CONF": "", "caching": False}
    return snap


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickle _snapshot() to `filename`: open it at https://pytorch.org/memory_viz or with
    `python -m torch.cuda._memory_viz trace_plot FILE -o trace.html`."""
    import pickle
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)
