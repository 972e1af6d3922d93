"""The emulator backend of the runtime seam: cores are budgets over host RAM."""

from __future__ import annotations

from .topology import Topology


def _core():
    from .. import _C
    return _C


def configure(topo: Topology, default_device: int) -> None:
    """The cores of `topo`; threads that never chose a device use `default_device`."""
    n = topo.device_count
    _core()._configure([topo.hbm_per_core] * n, [topo.label(i) for i in range(n)],
                       [topo.bank_of(i) for i in range(n)], [topo.attached(i) for i in range(n)],
                       detached_reason(topo), default_device)
    from ..dtypes import set_stochastic_rounding
    set_stochastic_rounding(topo.stochastic_rounding)


def detached_reason(topo: Topology) -> str:
    """Why a device index this process does not hold cannot be used, and the fix."""
    own = ", ".join(f"neuron:{topo.first_index + k}" for k in range(len(topo.visible)))
    return (f"under a launcher (torchrun, accelerate launch) each rank holds only its own NeuronCore, as in "
            f"TorchNeuron (NEURON_RT_VISIBLE_CORES=LOCAL_RANK); this rank holds {own}. Use "
            f"torch.device('neuron', int(os.environ['LOCAL_RANK'])) or torch.neuron.current_device(); "
            f"device_map='auto' places a model on the rank's own core.")


def mark_unavailable(reason: str) -> None:
    _core()._set_unavailable(reason)


def memory_stats(device: int) -> dict:
    """allocated/peak bytes, alloc/free/OOM counts and the core's HBM budget."""
    return _core()._memory_stats(device)


def empty_cache() -> None:
    """Returns the freed host blocks the emulator keeps for reuse to the host (counted on no core)."""
    _core()._empty_cache()


def cached_host_bytes() -> int:
    """Host bytes of freed device allocations kept for reuse (csrc/runtime/HostBlockCache.h)."""
    return _core()._cached_host_bytes()


def reset_peak(device: int) -> None:
    _core()._reset_peak(device)


def synchronize(device: int) -> None:
    _core()._synchronize(device)
