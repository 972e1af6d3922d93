"""`torch.neuron`: the device module, mirroring `torch.cuda`.

Registered as `torch.neuron` when torch_neuronx loads. Device management lives
here; memory, RNG and streams in their own files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .. import _C, runtime
from .memory import (empty_cache, max_memory_allocated, max_memory_reserved, mem_get_info, memory_allocated,
                     memory_reserved, memory_stats, memory_summary, reset_accumulated_memory_stats,
                     reset_max_memory_allocated, reset_peak_memory_stats)
from .random import (get_rng_state, get_rng_state_all, initial_seed, manual_seed, manual_seed_all, seed, seed_all,
                     set_rng_state, set_rng_state_all)
from .streams import (Event, Stream, StreamContext, _sleep, current_stream, default_stream, query, record_event,
                      set_stream, stream, wait_event, wait_stream)

__all__ = [
    "is_available", "device_count", "current_device", "set_device", "device", "device_of", "synchronize",
    "get_device_name", "get_device_properties", "get_device_capability", "is_bf16_supported",
    "get_amp_supported_dtype", "is_initialized", "init",
    "Stream", "Event", "current_stream", "default_stream", "set_stream", "stream", "StreamContext",
    "wait_stream", "wait_event", "record_event", "query",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "set_rng_state",
    "get_rng_state_all", "set_rng_state_all",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_accumulated_memory_stats", "mem_get_info",
    "empty_cache", "memory_stats", "memory_summary", "get_dynamo_metrics", "reset_dynamo_metrics",
]


def is_available() -> bool:
    return runtime.available()


def device_count() -> int:
    return runtime.topology().device_count if runtime.available() else 0


def is_initialized() -> bool:
    """Whether the runtime has started (as torch.cuda.is_initialized: asking never starts it)."""
    return runtime.started() and runtime.available()


def init() -> None:
    runtime.topology()  # starts the runtime; raises the environment error, if any


def _lazy_init() -> None:
    init()


def _is_in_bad_fork() -> bool:
    return False  # the emulator has no driver state that a fork could corrupt


def _is_compiled() -> bool:
    return True


def _index(device: Any = None, optional: bool = True) -> int:
    """Normalise int / "neuron:1" / torch.device / None to a device index."""
    if device is None:
        return current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, but got: {device}")
        return current_device() if device.index is None else device.index
    if isinstance(device, int):
        return device
    raise TypeError(f"Invalid device {device!r}: pass an int, 'neuron:N' or torch.device('neuron', N)")


def _checked(index: int) -> int:
    """`index`, if it names a visible core; else the runtime's one invalid-device error, as a ValueError.

    The device-selection API raises ValueError, as TorchNeuron's Python API does (`torch.neuron.device(n)`,
    `set_device`); a tensor placed on a missing core gets the same sentence as a RuntimeError (TorchNeuron's
    C++ device check, CUDA's "invalid device ordinal")."""
    if not 0 <= index < device_count():
        init()  # an unavailable runtime reports its own cause first
        try:
            _C._check_device(index)
        except RuntimeError as e:
            if str(e).startswith("Invalid device index"):
                raise ValueError(str(e).split("\nException raised from")[0]) from None
            raise
    return index


def current_device() -> int:
    return _C._current_device()


def set_device(device: Any) -> None:
    idx = _index(device)
    if idx >= 0:
        _C._set_device(_checked(idx))


class device:
    """Context manager that changes the current neuron device (like torch.cuda.device)."""

    def __init__(self, device: Any):
        self.idx = -1 if device is None else _index(device)
        self.prev = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev = current_device()
            set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0:
            set_device(self.prev)
        return False


class device_of(device):
    """Context manager that makes the given tensor's device current."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.device.type == "neuron" else -1)


def synchronize(device: Any = None) -> None:
    runtime.synchronize(_checked(_index(device)))


@dataclass(frozen=True)
class NeuronDeviceProperties:
    name: str               # e.g. "Trainium1 NeuronCore-v2"
    total_memory: int       # HBM bytes of this core
    instance_type: str
    core_id: int            # instance-level NeuronCore id
    multi_processor_count: int  # cores on the instance (what the CUDA field is used for: a count of units)
    logical_nc_config: int
    major: int = 2
    minor: int = 0

    def __repr__(self) -> str:
        return (f"NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory >> 20}MB, "
                f"instance_type='{self.instance_type}', core_id={self.core_id})")


def get_device_properties(device: Any = None) -> NeuronDeviceProperties:
    idx = _checked(_index(device))
    topo = runtime.topology()
    inst = topo.instance
    major = int(inst.core_version[1:])
    return NeuronDeviceProperties(
        name=f"{inst.chip} NeuronCore-{inst.core_version}", total_memory=topo.hbm_per_core,
        instance_type=inst.name, core_id=topo.core_of(idx), multi_processor_count=topo.total_cores,
        logical_nc_config=topo.lnc, major=major, minor=0)


def get_device_name(device: int | torch.device = 0) -> str:
    """The device's name, "neuron:N", as TorchNeuron's (default device 0); an int or a torch.device."""
    if isinstance(device, bool) or not isinstance(device, (int, torch.device)):
        raise ValueError(f"Incorrect device argument found, expected torch.device or int type, found {type(device)}")
    return f"neuron:{_checked(_index(device))}"


def get_device_capability(device: Any = None) -> tuple[int, int]:
    p = get_device_properties(device)
    return p.major, p.minor


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    """As TorchNeuron: fp32, fp16, bf16 (autocast's default on neuron is float16, as on CUDA: torch.get_autocast_dtype)."""
    return [torch.float32, torch.float16, torch.bfloat16]


def get_dynamo_metrics() -> dict:
    from ..compile import stats
    return stats.compile_stats()


def reset_dynamo_metrics() -> None:
    from ..compile import stats
    stats.reset()
