"""Every OpInfo in torch's op_db, run on neuron through the zero-copy fallback, matches CPU."""

import torch_neuronx

from op_sweep import sweep


def test_op_db_sweep_matches_cpu():
    torch_neuronx.reset_op_counts()
    passed, failed, skipped = sweep(max_samples=3)
    assert not failed, "ops that differ from CPU on neuron:\n" + "\n".join(f"{k}: {v}" for k, v in failed.items())
    assert len(passed) >= 600, f"only {len(passed)} OpInfos exercised"
    fallback_ops = torch_neuronx.get_fallback_ops()
    assert len(fallback_ops) >= 200, f"only {len(fallback_ops)} distinct ATen ops ran on the device"
