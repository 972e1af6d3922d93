"""RNG of neuron devices (torch.cuda's RNG API), as TorchNeuron's.

Eager random ops on neuron draw from the CPU's default generator, as on Trainium (TorchNeuron registers
no random op: they take its CPU fallback), so `torch.manual_seed(s)` gives the CPU's numbers, in one stream
shared by both devices. Each core also has a generator of its own, as TorchNeuron's: a Philox-style state
of 16 bytes (seed, offset), which these functions get and set; it serves random ops given an explicit
`torch.Generator("neuron")` and bf16 stochastic rounding (core/Generator.cpp). `torch.manual_seed` seeds
it too (torch calls manual_seed_all); torch.neuron's functions never touch the CPU generator.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch

from .. import _C


def _gen(device: Any = None) -> torch.Generator:
    from . import _checked, _index
    return _C._default_generator(_checked(_index(device)))


def get_rng_state(device: Any = None) -> torch.Tensor:
    """The 16-byte state (seed, offset; uint8) of the core's generator (default: the current core)."""
    return _gen(device).get_state()


def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
    """Restore a state from get_rng_state (16 bytes, or an 8-byte seed alone)."""
    _gen(device).set_state(state.cpu() if state.device.type != "cpu" else state)


def get_rng_state_all() -> list[torch.Tensor]:
    from . import device_count
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


def manual_seed(seed: int) -> None:
    _gen().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    from . import device_count
    for i in range(device_count()):
        _gen(i).manual_seed(int(seed))


def seed() -> None:
    _gen().seed()


def seed_all() -> None:
    from . import device_count
    s = _gen(0).seed() if device_count() else None
    for i in range(1, device_count()):
        _gen(i).manual_seed(s)


def initial_seed() -> int:
    return _gen().initial_seed()
