"""Fault-tolerant training: committed DCP checkpoints (torch_neuronx.distributed.checkpoint) and
examples/train_fault_tolerant.py under `torchrun --max-restarts`.

In one process: a save is committed atomically, a torn (.partial) or damaged checkpoint is never loaded.
Under torchrun (4 ranks, TP 2 x FSDP 2): a rank SIGKILLed mid-step or mid-save, the job restarts, resumes from
the last committed checkpoint and ends with parameters and optimizer state bit-identical to an uninterrupted
run; the checkpoint loads under other meshes (FSDP 4, TP 4) and in a plain CPU process without the plugin.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))
EXAMPLE = os.path.join(ROOT, "examples", "train_fault_tolerant.py")
STEPS, SAVE_EVERY = 8, 3  # checkpoints after steps 3, 6 and 8


# ---- the commit protocol, in one process -------------------------------------------------------------------

def _state(value: float) -> dict:
    return {"w": torch.full((4, 3), value, device="neuron"), "b": torch.arange(5.0, device="neuron") * value}


def test_save_commits_and_load_takes_the_newest(tmp_path):
    from torch_neuronx.distributed import checkpoint
    assert checkpoint.load(_state(0), tmp_path) is None  # nothing yet: start from scratch
    for step in (3, 6):
        path = checkpoint.save(_state(step), tmp_path, step)
        assert path == str(tmp_path / f"step_{step:08d}") and checkpoint.verify(path) is None
    manifest = json.loads((tmp_path / "step_00000006" / "COMMITTED").read_text())
    assert manifest["step"] == 6 and ".metadata" in manifest["files"] and manifest["world_size"] == 1
    state = _state(0)
    assert checkpoint.load(state, tmp_path) == 6
    assert state["w"].device.type == "neuron" and torch.equal(state["w"].cpu(), torch.full((4, 3), 6.0))
    assert torch.equal(state["b"].cpu(), torch.arange(5.0) * 6)


def test_partial_checkpoint_is_never_loaded_and_is_removed_by_the_next_save(tmp_path):
    from torch_neuronx.distributed import checkpoint
    checkpoint.save(_state(3), tmp_path, 3)
    # what a killed save leaves: a complete-looking DCP directory that was never committed
    torn = str(tmp_path / "step_00000006.partial")
    import torch.distributed.checkpoint as dcp
    dcp.save(_state(6), checkpoint_id=torn)
    assert os.path.exists(os.path.join(torn, ".metadata"))
    state = _state(0)
    assert checkpoint.load(state, tmp_path) == 3 and torch.equal(state["w"].cpu(), torch.full((4, 3), 3.0))
    checkpoint.save(_state(9), tmp_path, 9)
    assert sorted(os.listdir(tmp_path)) == ["step_00000003", "step_00000009"]


@pytest.mark.parametrize("damage", ["truncate", "delete", "no_manifest"])
def test_damaged_checkpoint_is_skipped_with_a_warning(tmp_path, damage):
    from torch_neuronx.distributed import checkpoint
    checkpoint.save(_state(3), tmp_path, 3)
    newest = tmp_path / "step_00000006"
    checkpoint.save(_state(6), tmp_path, 6)
    shard = next(p for p in newest.iterdir() if p.suffix == ".distcp")
    if damage == "truncate":
        shard.write_bytes(shard.read_bytes()[:10])
    elif damage == "delete":
        shard.unlink()
    else:
        (newest / "COMMITTED").unlink()
    state = _state(0)
    with pytest.warns(checkpoint.CheckpointWarning, match=r"step_00000006 is damaged \((.*distcp has 10 bytes, .*|"
                                                          r".*distcp is missing|no COMMITTED manifest)\)"):
        assert checkpoint.load(state, tmp_path) == 3
    assert torch.equal(state["w"].cpu(), torch.full((4, 3), 3.0))


def test_keep_prunes_the_oldest(tmp_path):
    from torch_neuronx.distributed import checkpoint
    for step in (1, 2, 3, 4):
        checkpoint.save(_state(step), tmp_path, step, keep=2)
    assert sorted(os.listdir(tmp_path)) == ["step_00000003", "step_00000004"]
    with pytest.raises(ValueError, match="keep at least"):
        checkpoint.save(_state(5), tmp_path, 5, keep=0)


# ---- torchrun --max-restarts: kills, resume, resharding ------------------------------------------------------

def _torchrun(ckpt, result=None, nproc: int = 4, timeout: int = 300, **env) -> subprocess.CompletedProcess:
    from test_distributed_launch import dist_env, free_port
    # the launch the docs prescribe for restartable jobs: c10d rendezvous, a fresh store per attempt
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--max-restarts=2",
           "--monitor-interval=0.5", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}", EXAMPLE]
    env = dict(CKPT_DIR=str(ckpt), STEPS=STEPS, SAVE_EVERY=SAVE_EVERY, TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, **env)
    if result:
        env["RESULT"] = str(result)
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=dist_env(**env), timeout=timeout)
    assert r.returncode == 0, f"{r.stdout[-4000:]}\n{r.stderr[-6000:]}"
    return r


def _losses(stdout: str) -> dict[int, str]:
    """step -> loss as printed, the last print of each step (a restarted attempt repeats the lost ones)."""
    return {int(s): loss for s, loss in re.findall(r"^step (\d+) loss (\S+)$", stdout, re.M)}


def _assert_identical(result_a, result_b):
    a, b = torch.load(result_a), torch.load(result_b)
    for part in ("model", "optimizer"):
        assert set(a[part]) == set(b[part]) and a[part], part
        for key, value in a[part].items():
            other = b[part][key]
            if isinstance(value, torch.Tensor):
                assert value.dtype == other.dtype and torch.equal(value, other), f"{part} {key} differs"
            else:
                assert value == other, f"{part} {key}: {value} != {other}"


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    d = tmp_path_factory.mktemp("uninterrupted")
    r = _torchrun(d / "ckpt", d / "result.pt")
    return d, r


@pytest.mark.slow
def test_uninterrupted_run_trains_and_checkpoints(uninterrupted):
    d, r = uninterrupted
    assert "attempt 0: mesh dp=2 x tp=2; no checkpoint: step 0" in r.stdout
    losses = _losses(r.stdout)
    assert sorted(losses) == list(range(STEPS)) and float(losses[STEPS - 1]) < float(losses[0])
    assert sorted(os.listdir(d / "ckpt")) == ["step_00000006", "step_00000008"]  # keep=2


@pytest.mark.slow
def test_killed_ranks_restart_and_end_bit_identical(uninterrupted, tmp_path):
    # attempt 0: rank 2 dies having written its shards of checkpoint 6 (no .metadata, not committed);
    # attempt 1 must resume from checkpoint 3, never from the torn one; it commits 6, then rank 1 dies between
    # backward and optimizer step of step 7; attempt 2 resumes from 6 and finishes.
    d, reference = uninterrupted
    r = _torchrun(tmp_path / "ckpt", tmp_path / "result.pt", FAULT_AT="2:6:save,1:7:step")
    out = r.stdout + r.stderr
    assert f"SIGKILL after writing its shards to {tmp_path / 'ckpt'}/step_00000006.partial" in out, out[-3000:]
    assert "SIGKILL in step 7, between backward and the optimizer step" in out, out[-3000:]
    ckpt = tmp_path / "ckpt"
    for attempt, step in ((1, 3), (2, 6)):
        assert f"attempt {attempt}: mesh dp=2 x tp=2; resumed from {ckpt}/step_{step:08d}" in r.stdout, r.stdout
    # each attempt starts right at the last committed checkpoint: only the steps after it run again
    assert re.findall(r"^step (\d+) loss", r.stdout, re.M) == [str(s) for s in [0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 6, 7]]
    # the steps that ran twice printed the same losses as the uninterrupted run
    assert _losses(r.stdout) == _losses(reference.stdout)
    _assert_identical(tmp_path / "result.pt", d / "result.pt")
    assert sorted(os.listdir(ckpt)) == ["step_00000006", "step_00000008"]  # the torn one is gone


@pytest.mark.slow
def test_checkpoint_reshards_to_another_mesh(uninterrupted, tmp_path):
    # saved under TP 2 x FSDP 2, loaded under TP 4 x FSDP 1: the state gathered on CPU is the same
    # (docs/fault-tolerance.md has the 8-rank TP 2 x FSDP 4 -> TP 4 x FSDP 2 command)
    d, _ = uninterrupted
    shutil.copytree(d / "ckpt", tmp_path / "ckpt")
    r = _torchrun(tmp_path / "ckpt", tmp_path / "result.pt", TP_SIZE=4)  # STEPS=8: loads step 8, trains nothing
    assert "mesh dp=1 x tp=4; resumed from" in r.stdout, r.stdout
    _assert_identical(tmp_path / "result.pt", d / "result.pt")


@pytest.mark.slow
def test_checkpoint_loads_in_a_plain_cpu_process(uninterrupted):
    # no plugin, no process group: plain torch reads the committed directory with dcp.load
    import hf_common
    d, _ = uninterrupted
    out = hf_common.run_plain_cpu(f"""
import json, sys
sys.path.insert(0, {os.path.join(ROOT, "examples")!r})
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict
from train_tp_fsdp import Transformer
model = Transformer(64, 2, 8)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
model_sd, optim_sd = get_state_dict(model, optimizer, options=StateDictOptions(flatten_optimizer_state_dict=True))
state = {{"train": {{"model": model_sd, "optimizer": optim_sd}}}}
dcp.load(state, checkpoint_id={str(d / "ckpt" / "step_00000008")!r})
reference = torch.load({str(d / "result.pt")!r})
bad = [f"{{part}} {{k}}" for part in ("model", "optimizer") for k, v in reference[part].items()
       if not (torch.equal(v, state["train"][part][k]) if isinstance(v, torch.Tensor) else v == state["train"][part][k])]
print(json.dumps({{"compared": sum(len(reference[p]) for p in ("model", "optimizer")), "different": bad}}))
""")
    result = json.loads(out.strip().splitlines()[-1])
    assert result["different"] == [] and result["compared"] > 20, result
