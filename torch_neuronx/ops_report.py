"""Op tracking, as TorchNeuron reports it: which ops would run on CPU on Trainium, which on
the NeuronCore, and how many distinct eager op signatures Trainium would compile.

On Trainium an ATen op runs on the NeuronCore when TorchNeuron has a Neuron lowering for
it; otherwise it falls back to the CPU (NEURON_FALLBACK_ENABLED, default 1), and the linear
algebra below is registered to run on the CPU on purpose. The emulator runs every op on the
host either way, so the reports follow the Trainium classification, not the emulator's
internal paths (get_emulator_op_counts() keeps those, for us).

Which ops have no Neuron lowering. AWS publishes the per-API table in the torch-neuronx
repository (docs/torch_api_compatibility.md, regenerated per release; not available to this
project), so this module uses a documented rule instead (docs/fidelity.md):
  1. LINALG_ON_CPU: the linear algebra TorchNeuron registers to run on CPU (qr, svd, eigh,
     cholesky, inv, lu, det and the solvers built on the same factorizations).
  2. WITHOUT_LOWERING: ops whose output shape depends on tensor values (nonzero, masked_select,
     unique, ...), which a compiler of static-shape graphs (neuronx-cc) cannot lower, and
     grid_sampler, which AWS users report as unsupported.
"""

from __future__ import annotations

import os
import warnings

import torch

from . import _C

LINALG_ON_CPU = frozenset({
    "aten::linalg_qr", "aten::geqrf", "aten::orgqr", "aten::ormqr", "aten::linalg_householder_product",
    "aten::_linalg_svd", "aten::_linalg_eigh", "aten::linalg_eig", "aten::_linalg_eigvals",
    "aten::linalg_cholesky_ex", "aten::cholesky", "aten::cholesky_inverse", "aten::_cholesky_solve_helper",
    "aten::linalg_inv_ex", "aten::linalg_lu", "aten::linalg_lu_factor_ex", "aten::linalg_lu_solve",
    "aten::lu_unpack", "aten::_linalg_det", "aten::_linalg_slogdet", "aten::_linalg_solve_ex",
    "aten::linalg_solve_triangular", "aten::triangular_solve", "aten::linalg_lstsq",
    "aten::linalg_ldl_factor_ex", "aten::linalg_ldl_solve",
})

WITHOUT_LOWERING = frozenset({
    # output shape depends on the values
    "aten::nonzero", "aten::masked_select", "aten::_unique", "aten::_unique2", "aten::unique_dim",
    "aten::unique_consecutive", "aten::unique_dim_consecutive", "aten::repeat_interleave",
    "aten::bincount",
    # reported unsupported by AWS users (aws-neuron-sdk issues)
    "aten::grid_sampler_2d", "aten::grid_sampler_3d", "aten::grid_sampler_2d_backward",
    "aten::grid_sampler_3d_backward",
})

CPU_ON_TRAINIUM = LINALG_ON_CPU | WITHOUT_LOWERING


def _base(name: str) -> str:
    return name.split(".", 1)[0]


def _sorted(pairs) -> dict[str, int]:
    return dict(sorted(pairs, key=lambda kv: (-kv[1], kv[0])))


def get_fallback_ops() -> dict[str, int]:
    """Ops that would run on the CPU on Trainium (no Neuron lowering, or linear algebra registered
    to the CPU), with call counts, most frequent first. A dict: `"aten::nonzero" in ops` and
    iteration give the op names, as TorchNeuron's list does."""
    return _sorted((op, n) for op, n in _C._op_calls() if _base(op) in CPU_ON_TRAINIUM)


def get_executed_ops() -> dict[str, int]:
    """Ops that would run on the NeuronCore on Trainium, with call counts, most frequent first
    (copies, allocation and views are not ops a NeuronCore runs and are not listed)."""
    return _sorted((op, n) for op, n in _C._op_calls() if _base(op) not in CPU_ON_TRAINIUM)


def get_op_signature_counts() -> dict[str, int]:
    """Distinct signatures (input shapes and dtypes) of each op: how many times Trainium's eager
    mode would compile it. A count that grows step after step means recompiles (docs/fidelity.md)."""
    return _sorted(_C._op_signature_counts())


def get_emulator_op_counts() -> dict[str, int]:
    """The emulator's own accounting: ops that took its generic host path (csrc/aten/native/
    Fallback.cpp) rather than a dedicated kernel. Says nothing about Trainium."""
    return _sorted(_C._fallback_counts())


def clear_op_tracking() -> None:
    """Reset every count above (fallback, executed, signatures, emulator counts)."""
    _C._reset_fallback_counts()
    _C._reset_op_signatures()


def reset_op_counts() -> None:
    """Deprecated: use clear_op_tracking() (TorchNeuron's name). Removed in the next release."""
    warnings.warn("torch_neuronx.reset_op_counts() is deprecated; use torch_neuronx.clear_op_tracking()",
                  DeprecationWarning, stacklevel=2)
    clear_op_tracking()


def _end_of_optimizer_step(optimizer, args, kwargs) -> None:
    _C._end_op_signature_step()


def _fallback_enabled_from_env() -> bool:
    value = os.environ.get("NEURON_FALLBACK_ENABLED", "1").strip().lower()
    if value not in ("0", "1", "false", "true", ""):
        warnings.warn(f"NEURON_FALLBACK_ENABLED={value!r} is not 0 or 1; using 1")
        return True
    return value not in ("0", "false")


_C._set_ops_without_lowering(sorted(WITHOUT_LOWERING))
_C._set_fallback_enabled(_fallback_enabled_from_env())
# A step of the op-signature rule is an optimizer step: PyTorch's global optimizer hook.
from torch.optim.optimizer import register_optimizer_step_post_hook  # noqa: E402

register_optimizer_step_post_hook(_end_of_optimizer_step)
