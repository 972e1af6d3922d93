"""Streams and events of neuron devices.

The emulator runs every kernel synchronously, so streams are always idle and
events complete when recorded; they exist so that code written for CUDA
(FSDP2 overlap, DataLoader, timing with Event.elapsed_time) runs unchanged.
"""

from __future__ import annotations

from typing import Any

import torch


def _device(device: Any) -> torch.device:
    from . import _index
    return torch.device("neuron", _index(device))


class Stream(torch.Stream):
    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:  # rebuilding an existing stream (e.g. from current_stream())
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=_device(device), priority=priority)


class _EventMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, torch.Event) and obj.device.type == "neuron"


class Event(metaclass=_EventMeta):
    """A neuron event. Builds a plain torch.Event on the neuron device: torch's event methods
    (elapsed_time, wait) accept only exact torch.Event objects, not subclasses."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        return torch.Event(device=torch.device("neuron", torch.neuron.current_device()),
                           enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def _wrap(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device: Any = None) -> Stream:
    return _wrap(torch.accelerator.current_stream(_device(device)))


def default_stream(device: Any = None) -> Stream:
    d = _device(device)
    kind = torch.accelerator.current_stream(d).device_type
    return Stream(stream_id=0, device_index=d.index, device_type=kind)


def set_stream(stream: torch.Stream) -> None:
    """Make `stream` the current stream of its device, and its device the current device (as torch.cuda)."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes a stream current for the duration of a with-block (torch.neuron.stream), on its device: a stream
    of another device makes that device current too, and leaving restores both devices' streams."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.src_prev: torch.Stream | None = None  # the current stream of the current device
        self.dst_prev: torch.Stream | None = None  # the current stream of the stream's device, if another

    def __enter__(self):
        if self.stream is None:
            return None
        self.src_prev = torch.accelerator.current_stream()
        if self.src_prev.device != self.stream.device:
            self.dst_prev = torch.accelerator.current_stream(self.stream.device)
        torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        if self.dst_prev is not None:
            torch.accelerator.set_stream(self.dst_prev)
        torch.accelerator.set_stream(self.src_prev)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)


# The current stream's operations, as torch.cuda's module functions.
def wait_stream(stream: torch.Stream) -> None:
    """Make the current stream wait for all work queued on `stream`."""
    current_stream().wait_stream(stream)


def wait_event(event: torch.Event) -> None:
    """Make the current stream wait for `event`."""
    current_stream().wait_event(event)


def record_event(event: torch.Event | None = None) -> torch.Event:
    """Record `event` (or a new event) on the current stream, and return it."""
    return current_stream().record_event(event)


def query() -> bool:
    """Whether all work queued on the current stream has completed (always, here: kernels run synchronously)."""
    return current_stream().query()


def _sleep(cycles: int) -> None:
    """Keep the current stream busy for `cycles` device clock cycles (torch.cuda._sleep; tests use it to
    hold a stream). The emulator's streams run synchronously, so the caller waits; cycles count at a nominal
    1 GHz (Neuron publishes no clock rate for its cores, and the point is a delay, not its exact length)."""
    if not isinstance(cycles, int) or isinstance(cycles, bool) or cycles < 0:
        raise ValueError(f"_sleep(cycles): cycles must be a non-negative int, got {cycles!r}")
    import time
    time.sleep(cycles / 1e9)
