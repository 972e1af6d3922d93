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


def set_stream(s: torch.Stream) -> None:
    if s is not None:
        torch.accelerator.set_stream(s)


class StreamContext:
    """Makes a stream current for the duration of a with-block (torch.neuron.stream)."""

    def __init__(self, s: torch.Stream | None):
        self.stream = s
        self.prev: torch.Stream | None = None

    def __enter__(self):
        if self.stream is not None:
            self.prev = torch.accelerator.current_stream(self.stream.device)
            torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.prev is not None:
            torch.accelerator.set_stream(self.prev)
        return False


def stream(s: torch.Stream | None) -> StreamContext:
    return StreamContext(s)
