"""A TRL/Trainer run of a model sharded at load (DistributedConfig, TP 2 x FSDP 2) survives killed ranks under
`torchrun --max-restarts=2` with DistributedCheckpointCallback (examples/hf_sft_fault_tolerant.py):
`trainer.train(resume_from_checkpoint=True)` skips the checkpoint torn by a kill mid-save and ends with the same
loss at every step, and the same final weights, as a run that was never interrupted."""

import os
import sys

import pytest
import torch

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))

@pytest.mark.slow
@pytest.mark.skipif("neuron" not in torch.distributed.Backend.backend_list,
                    reason="c10d backend 'neuron' not registered yet")
def test_sft_tp2_x_fsdp2_killed_mid_save_and_mid_step_resumes_to_the_same_losses():
    import hf_sft_fault_tolerant

    # attempt 0: rank 2 dies saving checkpoint-4; attempt 1: rank 1 dies in the step after 5; attempt 2 finishes
    r = hf_sft_fault_tolerant.main(["--tp", "2", "--fsdp", "2", "--fault", "2:4:save,1:5:step",
                                    "--max_steps", "6", "--save_steps", "2"])
    log = r["log"]
    assert "[rank 2] fault: SIGKILL while saving checkpoint-4" in log, log[-3000:]
    assert "[rank 1] fault: SIGKILL in the step after 5, before the optimizer step" in log, log[-3000:]
    # the torn checkpoint-4 (Trainer files written, sharded state not) is set aside, never resumed from
    assert "checkpoint-4 is incomplete (distributed_state: it was never written" in log, log[-3000:]
    assert "attempt 1 starts after 2 steps" in log and "attempt 2 starts after 4 steps" in log, log[-3000:]
    assert r["incomplete"] == ["checkpoint-4.incomplete"]
    assert r["killed"]["attempt"] == 2
    assert list(r["killed"]["losses"]) == [str(s) for s in range(1, 7)]
    assert r["killed"]["losses"] == r["reference"]["losses"]  # bit for bit: the same floats
    assert r["tensors"] > 10 and r["different"] == []


def test_callback_refuses_a_configuration_that_cannot_resume(tmp_path):
    # checked when the Trainer is created, before any training: one process, a model not sharded at load
    from helpers import tiny_llama
    from transformers import Trainer, TrainingArguments

    from torch_neuronx.distributed.trainer_checkpoint import DistributedCheckpointCallback

    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", save_total_limit=1)
    with pytest.raises(ValueError, match="is for models sharded by from_pretrained"):
        Trainer(model=tiny_llama(), args=args, callbacks=[DistributedCheckpointCallback()])
