"""Distributed training on neuron: the c10d backend "neuron" and the rank -> NeuronCore binding.

With it, PyTorch's own distributed stack runs on neuron tensors unchanged:
`init_process_group("neuron")`, DeviceMesh, DTensor, FSDP2 (fully_shard) and
tensor parallelism, launched with torchrun on one host or many. See
docs/distributed.md.

`register()` runs when torch_neuronx loads (`import torch`); it only registers
the backend's creator: the C++ bindings load, and a rank without a launcher is
bound to its core, when the first process group is created.
"""

from __future__ import annotations

from .backend import BACKEND_NAME, register_backend
from .device_binding import RankBindingError

__all__ = ["BACKEND_NAME", "RankBindingError", "register"]


def register() -> None:
    register_backend()
