"""Which ATen ops ran on the host fallback (as torch_neuronx.get_fallback_ops() reports on real Neuron)."""

from __future__ import annotations

from . import _C


def get_fallback_ops() -> dict[str, int]:
    """Ops that ran through the host fallback, with call counts, most frequent first."""
    return dict(sorted(_C._fallback_counts(), key=lambda kv: -kv[1]))


def get_executed_ops() -> dict[str, int]:
    """All ops executed on neuron devices through the fallback (emulator: every kernel runs on the host)."""
    return get_fallback_ops()


def reset_op_counts() -> None:
    _C._reset_fallback_counts()
