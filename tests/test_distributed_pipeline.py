"""Pipeline parallelism on neuron (examples/train_pipeline.py): a Transformers Llama cut into stages and trained with
torch.distributed.pipelining under torchrun; every step's loss equals one CPU process's training of the whole model
on the whole batch. The stages exchange activations and gradients with send/recv through the "neuron" backend
(checked point-to-point over shared memory: tests/test_distributed_faults.py covers its errors)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from helpers import ROOT

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

EXAMPLE = os.path.join(ROOT, "examples", "train_pipeline.py")


def run(nproc: int, *args: str, timeout: int = 400) -> subprocess.CompletedProcess:
    from test_distributed_launch import dist_env, free_port
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--master-addr=127.0.0.1",
           f"--master-port={free_port()}", "--max-restarts=0", EXAMPLE, *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=dist_env(), timeout=timeout)


def results(r: subprocess.CompletedProcess) -> dict[tuple[str, str], str]:
    """(schedule, "pp=.. dp=.. tp=..") -> "ok" / "FAIL", from the example's report."""
    return {(m[0], m[1]): m[2] for m in re.findall(r"schedule (\S+) (pp=\d+ dp=\d+ tp=\d+) microbatches=\d+: (\w+)",
                                                   r.stdout)}


@pytest.mark.slow
def test_two_stages_train_as_one_cpu_process():
    """2 stages on 2 ranks: GPipe and 1F1B (one stage per rank), interleaved 1F1B (two per rank); 4 microbatches."""
    r = run(2, "--schedules", "gpipe", "1f1b", "interleaved")
    assert r.returncode == 0, f"{r.stdout[-4000:]}\n{r.stderr[-6000:]}"
    assert results(r) == {(s, "pp=2 dp=1 tp=1"): "ok" for s in ("gpipe", "1f1b", "interleaved")}, r.stdout


@pytest.mark.slow
def test_pipeline_with_fsdp_and_with_tensor_parallel():
    """4 ranks as two 2-D meshes in one job: 2 stages x FSDP 2, then 2 stages x TP 2; every schedule."""
    r = run(4, "--mesh", "2,2,1", "2,1,2")
    assert r.returncode == 0, f"{r.stdout[-4000:]}\n{r.stderr[-6000:]}"
    assert results(r) == {(s, m): "ok" for s in ("gpipe", "1f1b", "interleaved")
                          for m in ("pp=2 dp=2 tp=1", "pp=2 dp=1 tp=2")}, r.stdout
