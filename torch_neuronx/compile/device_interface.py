"""The Dynamo/Inductor device interface of `neuron`.

Dynamo asks it about streams, events, the current device and device
properties when it traces code that touches them (torch.neuron.current_stream()
in a compiled region, Event timing, FSDP2 stream overlap). It maps each
question onto torch.neuron, so Dynamo sees the same device the user does.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface, register_interface_for_device


class NeuronInterface(DeviceInterface):
    device = torch.neuron.device  # type: ignore[assignment]
    Event = torch.neuron.Event  # type: ignore[assignment]
    Stream = torch.neuron.Stream  # type: ignore[assignment]

    class Worker:
        """Answers for compile worker processes; the emulator's answers need no device driver."""

        @staticmethod
        def set_device(device: int) -> None:
            torch.neuron.set_device(device)

        @staticmethod
        def current_device() -> int:
            return torch.neuron.current_device()

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> Any:
            return torch.neuron.get_device_properties(device)

    current_device = staticmethod(torch.neuron.current_device)
    set_device = staticmethod(torch.neuron.set_device)
    device_count = staticmethod(torch.neuron.device_count)
    is_available = staticmethod(torch.neuron.is_available)
    synchronize = staticmethod(torch.neuron.synchronize)
    stream = staticmethod(torch.neuron.stream)
    current_stream = staticmethod(torch.neuron.current_stream)
    set_stream = staticmethod(torch.neuron.set_stream)
    memory_allocated = staticmethod(torch.neuron.memory_allocated)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        return NeuronInterface.exchange_device(device)

    @staticmethod
    def exchange_device(device: int) -> int:
        previous = torch.neuron.current_device()
        if device >= 0 and device != previous:
            torch.neuron.set_device(device)
        return previous

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.neuron.set_stream(torch.neuron.Stream(stream_id=stream_id, device_index=device_index,
                                                    device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return 0  # kernels run synchronously on the host: one implicit stream

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> Any:
        return ""

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @classmethod
    def is_dtype_supported(cls, dtype: torch.dtype, including_emulation: bool = False) -> bool:
        # NeuronCores have no fp64 engines; float64 runs on the host fallback (see dtypes.py).
        return dtype not in (torch.float64, torch.complex128) or including_emulation

    @staticmethod
    def is_triton_capable(device: torch.types.Device = None) -> bool:
        return False


def register() -> None:
    register_interface_for_device("neuron", NeuronInterface)
    for index in range(torch.neuron.device_count()):
        register_interface_for_device(f"neuron:{index}", NeuronInterface)
