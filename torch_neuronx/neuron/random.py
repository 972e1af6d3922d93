"""RNG of neuron devices (torch.cuda's RNG API). Each core has its own default generator."""

from __future__ import annotations

from typing import Any, Iterable

import torch

from .. import _C


def _gen(device: Any = None) -> torch.Generator:
    from . import _checked, _index
    return _C._default_generator(_checked(_index(device)))


def get_rng_state(device: Any = "neuron") -> torch.Tensor:
    return _gen(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "neuron") -> None:
    _gen(device).set_state(new_state.cpu() if new_state.device.type != "cpu" else new_state)


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
