"""Random ops of checkpointed regions in compiled neuron graphs cannot be replayed (torch 2.13).

With activation checkpointing (Transformers' gradient_checkpointing, torch.utils.checkpoint) inside a
compiled region, AOTAutograd's partitioner makes the backward recompute the region's random ops
(dropout) with the same random numbers as the forward: the forward runs each one through the
higher-order op `run_and_save_rng_state` (keep the generator state, then run the op) and the backward
through `run_with_rng_state` (run the op from that state). Both pick the generator by the device type
of their tensor arguments, in a table that knows cpu/cuda/hpu/xpu only. Compiled neuron graphs run on
neuron tensors (launch.py), whose random ops draw from the CPU's default generator, as eager random ops on
neuron do (neuron/random.py): this adds neuron to both tables, with that generator.

Why a shim: each table is a dict local to the HOP's BackendSelect kernel (torch/_prims/rng_prims.py,
`impl_backend_select`), so there is nothing to register into. The shim wraps those two kernels: a call
whose tensors are neuron tensors uses the core's generator, every other call goes to torch's kernel
unchanged. Installed when Dynamo is first imported (compile/__init__.py), never by `import torch`.

Upstream fix that removes it: rng_prims picks the generator of any device through its device module
(`torch.get_device_module(device).get_rng_state/set_rng_state`, which PrivateUse1 devices provide)
instead of a fixed cpu/cuda/hpu/xpu table.
"""

from __future__ import annotations

from typing import Any

import torch

NEURON = "neuron"
WRITTEN_FOR = "2.13."


def _neuron_index(args: tuple, kwargs: dict) -> int | None:
    """The core of the first neuron tensor (or device) among the op's arguments, None if there is none."""
    device = kwargs.get("device")
    if device is not None:
        device = torch.device(device)
        return (device.index or 0) if device.type == NEURON else None
    for a in args:
        if isinstance(a, torch.Tensor):
            return (a.device.index or 0) if a.device.type == NEURON else None
    return None


def _run_and_save(original):
    def impl(op, *args, **kwargs):
        index = _neuron_index(args, kwargs)
        if index is None:
            return original(op, *args, **kwargs)
        return torch.random.get_rng_state(), op(*args, **kwargs)
    return impl


def _run_with(original):
    def impl(rng_state, op, *args, **kwargs):
        index = _neuron_index(args, kwargs)
        if index is None:
            return original(rng_state, op, *args, **kwargs)
        current = torch.random.get_rng_state()
        # the saved state is a graph value: a compiled graph's executor may have moved it to the device
        torch.random.set_rng_state(rng_state.cpu())
        try:
            return op(*args, **kwargs)
        finally:
            torch.random.set_rng_state(current)
    return impl


_registered = False


def install() -> None:
    global _registered
    if _registered:
        return
    if not torch.__version__.startswith(WRITTEN_FOR):
        import warnings
        warnings.warn(f"torch_neuronx: the checkpoint RNG replay shim was written for torch {WRITTEN_FOR}x, not "
                      f"{torch.__version__}: not installed (torch_neuronx/integrations/checkpoint_rng_replay.py)")
        _registered = True
        return
    from torch._C import DispatchKey
    from torch._prims import rng_prims
    for hop, wrap in ((rng_prims.run_and_save_rng_state, _run_and_save),
                      (rng_prims.run_with_rng_state, _run_with)):
        original: Any = hop.py_kernels[DispatchKey.BackendSelect]
        hop.py_kernels[DispatchKey.BackendSelect] = wrap(original)
        hop._dispatch_cache.clear()
    _registered = True
