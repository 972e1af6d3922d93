"""Distributed TRL fine-tuning on neuron (examples/hf_sft_distributed.py): torchrun, DistributedConfig(tp x fsdp)
through SFTTrainer to from_pretrained, weights sharded at load, no --fsdp flag, losses vs a single-process CPU
run, and trainer.save_model() loadable by plain CPU PyTorch (no plugin) with the same logits."""

import os
import sys

import pytest
import torch

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif("neuron" not in torch.distributed.Backend.backend_list,
                       reason="c10d backend 'neuron' not registered yet"),
]


def test_sft_tp2_x_fsdp2_matches_cpu_and_checkpoint_loads_on_plain_cpu():
    import hf_sft_distributed

    r = hf_sft_distributed.main(["--tp", "2", "--fsdp", "2", "--max_steps", "3", "--max_length", "96"])
    assert r["world_size"] == 4 and r["backend"] == "neuron"
    # sharded at load: q_proj is column-parallel over tp (and FSDP-sharded over fsdp)
    assert r["sharded"] > 0 and r["q_local"][0] * 2 <= r["q_global"][0], (r["q_local"], r["q_global"])
    assert all(shape[1] % 128 == 0 for _, shape, *_ in r["shapes"])  # x128 padding on every rank
    assert r["max_rel_diff"] <= 5e-3
    assert "model.safetensors" in r["files"] and "config.json" in r["files"]
    assert r["reload_diff"] <= 1e-4
