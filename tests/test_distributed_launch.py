"""Launching ranks on neuron: torchrun helpers for the distributed tests, and the rank -> NeuronCore binding.

Each rank holds its own core, NeuronCore LOCAL_RANK, as device neuron:LOCAL_RANK (TorchNeuron's rule); a
host with more ranks than cores fails at init_process_group with a clear error.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from helpers import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dist_env(**extra) -> dict:
    """Environment of a spawned rank: no inherited launcher variables, quiet threads."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                        "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID")}
    env.update({"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def torchrun_cmd(script: str, nproc: int, *args: str, nnodes: int = 1, node_rank: int = 0,
                 port: int | None = None) -> list[str]:
    """A torchrun command line for a script in this directory, rendezvous on 127.0.0.1."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", f"--nnodes={nnodes}",
           f"--node-rank={node_rank}", "--master-addr=127.0.0.1", f"--master-port={port or free_port()}",
           "--max-restarts=0", "--monitor-interval=0.5"]
    return cmd + [os.path.join(ROOT, "tests", script), *args]


def torchrun(script: str, nproc: int, *args: str, timeout: int = 240, **env) -> subprocess.CompletedProcess:
    return subprocess.run(torchrun_cmd(script, nproc, *args), capture_output=True, text=True, cwd=ROOT,
                          env=dist_env(**env), timeout=timeout)


def run_together(cmds: list[list[str]], timeout: float, envs: list[dict] | None = None,
                 wait_for: list[int] | None = None) -> list[tuple[int, str]]:
    """Start the commands at once and wait for them: [(returncode, stdout + stderr)].

    Output goes to files, not pipes: waiting on one process while another fills
    its pipe would deadlock them both. Only the processes listed in `wait_for`
    (default: all) are waited for, until the deadline; the others, and any still
    running at the deadline, are killed (returncode None).
    """
    import tempfile
    import time
    logs = [tempfile.TemporaryFile(mode="w+") for _ in cmds]
    procs = [subprocess.Popen(c, stdout=log, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                              env=(envs[i] if envs else dist_env())) for i, (c, log) in enumerate(zip(cmds, logs))]
    deadline = time.monotonic() + timeout
    waited = range(len(procs)) if wait_for is None else wait_for
    for i in waited:
        try:
            procs[i].wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    codes = []
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
            codes.append(None)
        else:
            codes.append(p.returncode)
    out = []
    for code, log in zip(codes, logs):
        log.seek(0)
        out.append((code, log.read()))
        log.close()
    return out


# ---- binding rules ---------------------------------------------------------------------------------------------

_BINDING_VARS = ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "TORCHNEURON_INSTANCE", "NEURON_RT_VISIBLE_CORES",
                 "NEURON_RT_NUM_CORES", "NEURON_LOGICAL_NC_CONFIG")


def _rank_device(monkeypatch, strict=True, **env):
    from torch_neuronx import runtime
    from torch_neuronx.distributed.device_binding import rank_device
    for name in _BINDING_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TORCHNEURON_INSTANCE", "trn2.48xlarge")
    for name, value in env.items():
        monkeypatch.setenv(name, str(value))
    return rank_device(strict=strict, topology=runtime.discover())


@pytest.mark.parametrize("env, device", [
    ({}, None),                                                                          # no launcher: no binding
    ({"LOCAL_RANK": 5, "LOCAL_WORLD_SIZE": 8}, 5),                                       # trn2.48xlarge: 64 cores
    ({"LOCAL_RANK": 31, "LOCAL_WORLD_SIZE": 32}, 31),
    ({"LOCAL_RANK": 1, "LOCAL_WORLD_SIZE": 2, "TORCHNEURON_INSTANCE": "trn1.2xlarge"}, 1),
    ({"LOCAL_RANK": 40, "LOCAL_WORLD_SIZE": 64, "TORCHNEURON_INSTANCE": "trn2.48xlarge"}, 40),
    ({"LOCAL_RANK": 3, "LOCAL_WORLD_SIZE": 4, "WORLD_SIZE": 4, "NEURON_RT_VISIBLE_CORES": "3"}, 3),  # own core
    ({"LOCAL_RANK": 3, "LOCAL_WORLD_SIZE": 4, "WORLD_SIZE": 8}, 3),          # launched: TorchNeuron's numbering
])
def test_rank_binds_to_local_rank(monkeypatch, env, device):
    assert _rank_device(monkeypatch, **env) == device


def test_more_ranks_than_cores_is_a_clear_error(monkeypatch):
    from torch_neuronx.distributed import RankBindingError
    with pytest.raises(RankBindingError, match=r"runs 70 ranks but the emulated trn2.48xlarge exposes 64 NeuronCore"
                                               r"\(s\).*--nproc-per-node 64.*TORCHNEURON_INSTANCE"):
        _rank_device(monkeypatch, LOCAL_RANK=3, LOCAL_WORLD_SIZE=70)
    with pytest.raises(RankBindingError, match="exposes 2 NeuronCore"):
        _rank_device(monkeypatch, LOCAL_RANK=2, LOCAL_WORLD_SIZE=3, TORCHNEURON_INSTANCE="trn1.2xlarge")
    assert _rank_device(monkeypatch, strict=False, LOCAL_RANK=65, LOCAL_WORLD_SIZE=70) is None  # import time


# ---- the same in fresh processes: binding at first device use, init_process_group as the HF stack calls it ----

def _in_process(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=dist_env(**env), timeout=120)


def test_rank_is_bound_at_first_use_and_hf_style_init_works():
    code = """
import os, tempfile, torch, torch.distributed as dist
print("at import", torch.neuron.current_device())
torch.accelerator.set_device_index(int(os.environ["LOCAL_RANK"]))   # what Transformers does
dist.init_process_group("neuron", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
print("accelerate", torch.neuron.current_device())                 # what Accelerate reads
t = torch.ones(3, device="neuron")
dist.all_reduce(t)
dist.barrier(device_ids=[int(os.environ["LOCAL_RANK"])])
dist.broadcast_object_list([{"a": 1}], src=0)                       # object collectives ride neuron tensors
print("backend", dist.get_backend(), "device", t.device)
"""
    r = _in_process(code, LOCAL_RANK=2, LOCAL_WORLD_SIZE=4)
    assert r.returncode == 0, r.stderr
    assert "at import 2" in r.stdout and "accelerate 2" in r.stdout
    assert "backend neuron device neuron:2" in r.stdout


def test_impossible_binding_keeps_import_working_and_fails_at_init():
    code = """
import tempfile, torch, torch.distributed as dist
print("at import", torch.neuron.current_device())
dist.init_process_group("neuron", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
"""
    r = _in_process(code, LOCAL_RANK=65, LOCAL_WORLD_SIZE=70)
    assert "at import 0" in r.stdout, r.stderr
    assert r.returncode != 0
    assert "RankBindingError" in r.stderr and "exposes 64 NeuronCore(s)" in r.stderr


# ---- the runtime starts at first device use: launchers that set the environment after `import torch` ---------

def test_runtime_starts_at_first_device_use_not_at_import():
    code = """
import os, torch, torch_neuronx
print("after import", torch_neuronx.is_neuron_runtime_initialized(), torch.neuron.is_initialized())
os.environ["NEURON_RT_VISIBLE_CORES"] = "5-6"          # after the import, before the first device use
t = torch.ones(2, device="neuron")
print("after use", torch_neuronx.is_neuron_runtime_initialized(), torch.neuron.device_count(),
      torch.neuron.get_device_properties(1).core_id)
"""
    r = _in_process(code)
    assert r.returncode == 0, r.stderr
    assert "after import False False" in r.stdout and "after use True 2 6" in r.stdout, r.stdout


SPAWNED = """
import os, sys, tempfile
import torch                                   # before any launcher variable is set, as mp.spawn workers do
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, port, store_file, how):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE=str(world), RANK=str(rank))
    if how == "harness":           # the real TorchNeuron suite's harness: LOCAL_RANK and the core, after the import
        os.environ.update(LOCAL_RANK=str(rank), NEURON_RT_VISIBLE_CORES=str(2 + rank))
        dist.init_process_group("neuron")
    else:                          # PyTorch's MultiProcessTestCase: rank and world size only, a FileStore
        dist.init_process_group("neuron", rank=rank, world_size=world, store=dist.FileStore(store_file, world))
    dev = torch.device("neuron", rank)
    t = torch.full((3,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    print(f"{how} rank {rank} count {torch.neuron.device_count()} current {torch.neuron.current_device()} "
          f"core {torch.neuron.get_device_properties(rank).core_id} sum {t.cpu().tolist()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    for how in ("harness", "multiprocess_test_case"):
        mp.spawn(worker, args=(2, sys.argv[1], tempfile.mktemp(), how), nprocs=2)
"""


@pytest.mark.slow
def test_spawned_ranks_that_set_the_environment_after_import(tmp_path):
    """mp.spawn workers (the real suite's harness) and MultiProcessTestCase-style ranks bind at init_process_group:
    each holds its own core, device_count() is the number of ranks on the host, as TorchNeuron's."""
    script = tmp_path / "spawned.py"
    script.write_text(SPAWNED)
    r = subprocess.run([sys.executable, str(script), str(free_port())], capture_output=True, text=True, cwd=ROOT,
                       env=dist_env(), timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    for rank in range(2):
        assert f"harness rank {rank} count 2 current {rank} core {2 + rank} sum [3.0, 3.0, 3.0]" in r.stdout, r.stdout
        assert f"multiprocess_test_case rank {rank} count 2 current {rank} core {rank} sum [3.0, 3.0, 3.0]" \
            in r.stdout, r.stdout
