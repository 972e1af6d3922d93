"""PEFT LoRA on neuron (examples/hf_peft_lora.py): the same loop on neuron and CPU gives the same losses (LoRA
dropout included: same seed, same masks); the adapter saved on neuron reloads on a plain CPU install."""

import os
import sys

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))
import hf_peft_lora  # noqa: E402


def test_lora_training_matches_cpu_and_adapter_reloads_without_plugin():
    r = hf_peft_lora.main(["--steps", "5"])
    assert len(r["losses"]) == 5
    assert r["max_rel_diff"] <= 1e-5  # fp32, dropout on: identical RNG streams on neuron and CPU
    assert r["losses"][-1] < r["losses"][0]
    assert os.path.exists(os.path.join(r["adapter_dir"], "adapter_config.json"))
    assert r["reload_diff"] <= 1e-4 and r["merged_diff"] <= 1e-4
