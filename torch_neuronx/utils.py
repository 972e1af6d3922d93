"""`torch_neuronx.utils`: the helpers of TorchNeuron's module of that name that mean something here.

Present, with TorchNeuron's names and signatures: the platform and LNC queries, the dtype support queries,
pytree moves between devices, the registered-op list, op-tracking logging for custom ops, and the switches
tests and scripts read. Absent, because they describe the real plugin's internals or need the Neuron
compiler's Python package (neuronxcc, not on PyPI): get_gmm_align, skip_op_preconditions (its op
lowerings' switches), log_neff_cache_* (its C++ NEFF cache log), map_external_dtype_to_torch /
map_torch_dtype_to_external (NKI and neuronxcc dtypes), convert_for_neuron (its 64-bit cast policy:
here docs/fidelity.md's int64/fp64 rules apply to every op), suppress_specific_warnings, MXFP8.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.utils._pytree as pytree

# ==================== Tensors ====================


def flatten_tensors(obj: Any) -> list[torch.Tensor]:
    """Every tensor of a tensor, or of nested lists and tuples of them, in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in flatten_tensors(item)]
    return []


def get_device_from_tensors(tensors: Any) -> torch.device:
    """The device of the first tensor in `tensors` (nested lists and tuples), else the current neuron device."""
    for t in flatten_tensors(tensors):
        return t.device
    return torch.device("neuron", torch.neuron.current_device())


def move_pytree_to_cpu(obj: Any) -> Any:
    """`obj` with every neuron tensor in it (nested lists, tuples, dicts) copied to the CPU."""
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to("cpu") if t.device.type == "neuron" else t, obj)


def move_pytree_to_neuron(obj: Any) -> Any:
    """`obj` with every tensor in it (nested lists, tuples, dicts) on the current neuron device."""
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to("neuron"), obj)


def cast_dtype_if_needed(tensor: torch.Tensor, target_dtype: torch.dtype | None) -> torch.Tensor:
    """`tensor` in `target_dtype` (itself when None or already that dtype)."""
    if target_dtype is None or tensor.dtype == target_dtype:
        return tensor
    return tensor.to(dtype=target_dtype)


# ==================== Platform ====================


def get_platform_target() -> str:
    """The Neuron platform of the (emulated) instance: "trn1", "trn2", "trn3" or "inf2"."""
    from .runtime import topology
    chip = topology().instance.chip
    return {"Trainium1": "trn1", "Trainium2": "trn2", "Trainium3": "trn3", "Inferentia2": "inf2"}[chip]


def get_lnc_setting() -> str:
    """The runtime's logical NeuronCore config ("1" or "2"; "1" on trn1/inf2)."""
    from .runtime import topology
    return str(topology().lnc)


def get_logical_neuron_cores() -> str:
    """NEURON_LOGICAL_NC_CONFIG if set, else the instance's default (get_lnc_setting())."""
    return os.environ.get("NEURON_LOGICAL_NC_CONFIG", get_lnc_setting())


def get_worker_multiplier() -> int:
    """Visible cores per physical-core pair's worth of workers: 2 on trn2 at LNC=1, else 1."""
    return 2 if get_platform_target() == "trn2" and get_logical_neuron_cores() == "1" else 1


def is_float8_e4m3_supported() -> bool:
    """TorchNeuron's rule: Trainium2's float8 is e4m3 (torch.float8_e4m3fn tensors map to it there)."""
    return get_platform_target() == "trn2"


def is_float8_e4m3fn_supported() -> bool:
    """TorchNeuron's rule: float8 e4m3fn everywhere but Trainium2 (its targets: Trainium2 and Trainium3)."""
    return get_platform_target() != "trn2"


def is_mxocp_supported() -> bool:
    """TorchNeuron's rule: the OCP microscaling formats (MXFP8) everywhere but Trainium2."""
    return get_platform_target() != "trn2"


# ==================== Switches ====================


def is_sync_mode_enabled() -> bool:
    """Whether eager ops finish before the call returns (NEURON_LAUNCH_BLOCKING=1 on Trainium). Always true
    here: the emulator's kernels run synchronously on the host, so errors surface at the op that caused them
    whatever NEURON_LAUNCH_BLOCKING says."""
    return True


def use_mlir_aten_ops() -> bool:
    """Whether eager ATen ops take TorchNeuron's torch-mlir path: TORCH_NEURONX_MLIR_ATEN_OPS=1, which importing
    the plugin sets by default, as TorchNeuron does. Op tracking reports that path's op names (aten::mv,
    aten::clamp.Tensor, aten::index_add_), which code reading this switch expects; the emulator runs its host
    kernels either way, so the switch changes nothing else."""
    return os.environ.get("TORCH_NEURONX_MLIR_ATEN_OPS", "0") == "1"


def is_neff_cache_disabled() -> bool:
    """TORCH_NEURONX_DISABLE_NEFF_CACHE: the compile cache is neither read nor written (docs/compile.md)."""
    from .compile import neff_cache
    return not neff_cache.enabled()


# ==================== Op tracking ====================


def get_neuron_registered_ops(as_sorted: bool = False, keep_variant: bool = False) -> set[str] | list[str]:
    """The ATen ops TorchNeuron registers Neuron kernels for ("add", or "add.Tensor" with keep_variant): the
    set get_executed_ops() classifies by (registered_ops.py says where it comes from). The real function lists
    the dispatcher's PrivateUse1 registrations, which are that set on Trainium; here the dispatcher also holds
    the emulator's own host kernels, which say nothing about Trainium."""
    from .registered_ops import REGISTERED_OPS, REGISTERED_OVERLOADS
    names = {n.split("::", 1)[1] for n in (REGISTERED_OVERLOADS if keep_variant else REGISTERED_OPS)}
    return sorted(names) if as_sorted else names


def log_executed_op(op_name: str) -> None:
    """Record `op_name` as run on the NeuronCore (get_executed_ops()), e.g. from a custom op's kernel."""
    from . import _C
    _C._log_op(op_name, True)


def log_offloaded_op(op_name: str) -> None:
    """Record `op_name` as run on the CPU (get_fallback_ops())."""
    from . import _C
    _C._log_op(op_name, False)
