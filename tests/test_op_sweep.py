"""Every OpInfo in torch's op_db, run on neuron through the zero-copy fallback, matches CPU.

The sweep checks the emulator's machinery against CPU bit for bit, so it runs with host int64 and
float64 semantics (TORCHNEURON_INT64=exact, TORCHNEURON_FP64=exact): Neuron's dtype rules, which
change those values on purpose, have their own tests (tests/test_fidelity_ops.py)."""

import torch_neuronx
from torch_neuronx import dtypes

from op_sweep import sweep


def test_op_db_sweep_matches_cpu():
    torch_neuronx.clear_op_tracking()
    dtypes.set_int64_mode("exact")
    dtypes.set_fp64_mode("exact")
    try:
        passed, failed, skipped = sweep(max_samples=3)
    finally:
        dtypes.set_int64_mode(dtypes.DEFAULT_INT64)
        dtypes.set_fp64_mode(dtypes.DEFAULT_FP64)
    assert not failed, "ops that differ from CPU on neuron:\n" + "\n".join(f"{k}: {v}" for k, v in failed.items())
    assert len(passed) >= 600, f"only {len(passed)} OpInfos exercised"
    emulator_ops = torch_neuronx.get_emulator_op_counts()
    assert len(emulator_ops) >= 200, f"only {len(emulator_ops)} distinct ATen ops ran through the host fallback"
