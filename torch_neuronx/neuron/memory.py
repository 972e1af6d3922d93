"""Memory accounting of the emulated cores (torch.cuda's memory API)."""

from __future__ import annotations

import sys
from typing import Any

from .. import runtime


def _idx(device: Any) -> int:
    from . import _checked, _index
    return _checked(_index(device))


def memory_stats(device: Any = None) -> dict[str, Any]:
    """The core's allocator statistics in TorchNeuron's format:

    allocated_bytes, reserved_bytes, active_bytes: each {"current", "peak", "allocated", "freed"} (bytes now,
    the peak since reset_peak_memory_stats, and the totals ever allocated and freed); num_alloc_retries,
    num_ooms, num_tensor_frees, allocation_requests: counts since reset_accumulated_memory_stats.

    On Trainium reserved >= allocated >= active (its caching allocator keeps segments and rounds requests,
    Neuron 2.33 docs). The emulator allocates each tensor exactly and keeps no device memory cached (its cache
    of freed host blocks is counted on no core), so the three are equal, and it never retries an allocation.
    torch.accelerator.memory_stats("neuron") gives the same numbers under CUDA's flat keys.
    """
    s = runtime.memory_stats(_idx(device))

    def stat() -> dict[str, int]:
        return {"current": s["allocated_bytes"], "peak": s["peak_allocated_bytes"],
                "allocated": s["total_allocated_bytes"], "freed": s["total_freed_bytes"]}

    return {"allocated_bytes": stat(), "reserved_bytes": stat(), "active_bytes": stat(),
            "num_alloc_retries": 0, "num_ooms": s["num_ooms"], "num_tensor_frees": s["num_frees"],
            "allocation_requests": s["num_allocs"]}


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


def _format_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{n} B"


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A table of memory_stats(), headed "Neuron Memory Summary" as TorchNeuron's, with this core's HBM budget
    and what is free of it. `abbreviated` leaves out the counts line."""
    idx = _idx(device)
    stats = memory_stats(idx)
    free, total = mem_get_info(idx)
    width = 75
    lines = ["=" * width, f"  Neuron Memory Summary, Device {idx}", "=" * width]
    if not abbreviated:
        lines += [f"  Allocations: {stats['allocation_requests']:,}  |  Frees: {stats['num_tensor_frees']:,}",
                  f"  OOMs: {stats['num_ooms']:,}  |  Alloc Retries: {stats['num_alloc_retries']:,}",
                  "=" * width]
    lines += [f"  {'Metric':<18} | {'Current':>10} | {'Peak':>10} | {'Allocated':>10} | {'Freed':>10}", "-" * width]
    for name, key in (("Allocated Memory", "allocated_bytes"), ("Reserved Memory", "reserved_bytes"),
                      ("Active Memory", "active_bytes")):
        st = stats[key]
        lines.append(f"  {name:<18} | {_format_bytes(st['current']):>10} | {_format_bytes(st['peak']):>10} | "
                     f"{_format_bytes(st['allocated']):>10} | {_format_bytes(st['freed']):>10}")
    lines += ["-" * width, f"  HBM budget {_format_bytes(total)}, free {_format_bytes(free)}", "=" * width]
    return "\n".join(lines)


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
