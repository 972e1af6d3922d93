"""Neuron's documented runtime and platform rules, one test each (docs/fidelity.md).

Each test states the rule as AWS documents it (runtime configuration guide, Trn2/Trn3 architecture pages,
TorchNeuron), not as our code happens to do it.
"""

from __future__ import annotations

import pytest

from helpers import run_python, discover
from torch_neuronx.runtime import GiB, TopologyError

MiB = 1 << 20
RESERVE = 96 * MiB  # the runtime's HBM per physical core


# ---- platforms -------------------------------------------------------------------------------------------------

def test_default_instance_is_a_trn2_instance_torchneuron_supports():
    t = discover({})
    assert t.instance.chip == "Trainium2" and t.instance.supported_by_torchneuron
    assert (t.device_count, t.lnc) == (64, 2)                       # trn2.48xlarge: 16 chips x 4 logical cores
    assert not discover({"TORCHNEURON_INSTANCE": "trn1.32xlarge"}).instance.supported_by_torchneuron


def test_trn3_has_eight_neuroncore_v4_and_144_gib_per_chip():
    for name, chips in (("trn3-gen1", 16), ("trn3-gen2", 4)):
        t = discover({"TORCHNEURON_INSTANCE": name})
        assert t.instance.core_version == "v4" and t.instance.hbm_per_chip == 144 * GiB
        assert t.lnc == 2 and t.device_count == chips * 4                 # LNC=2 by default, as on Trn2
        assert t.hbm_per_core == 36 * GiB - 2 * RESERVE                   # a pair's bank, less two reserves
        t1 = discover({"TORCHNEURON_INSTANCE": name, "NEURON_LOGICAL_NC_CONFIG": "1",
                       "NEURON_RT_NUM_CORES": "16"})
        assert t1.lnc == 1 and t1.total_cores == chips * 8


def test_lnc_applies_to_trn2_and_trn3_only():
    for name in ("trn2.3xlarge", "trn3-gen2"):
        assert discover({"TORCHNEURON_INSTANCE": name, "NEURON_LOGICAL_NC_CONFIG": "1"}).lnc == 1
    for name in ("trn1.32xlarge", "inf2.xlarge"):
        assert discover({"TORCHNEURON_INSTANCE": name}).lnc == 1
        with pytest.raises(TopologyError, match="Trainium2 and Trainium3 only"):
            discover({"TORCHNEURON_INSTANCE": name, "NEURON_LOGICAL_NC_CONFIG": "2"})


def test_compiler_lnc_must_equal_runtime_lnc():
    assert discover({"NEURON_CC_FLAGS": "--lnc 2 -O1"}).lnc == 2
    with pytest.raises(TopologyError, match="--lnc 1 but the runtime runs LNC=2"):
        discover({"NEURON_CC_FLAGS": "--model-type transformer --lnc=1"})


def test_runtime_reserve_is_taken_out_of_hbm():
    trn1 = discover({"TORCHNEURON_INSTANCE": "trn1.2xlarge"})
    assert trn1.hbm_per_core == 16 * GiB - RESERVE                   # one physical core per bank
    assert discover({}).hbm_per_core == 24 * GiB - 2 * RESERVE       # a logical core is two physical cores


def test_128_or_more_visible_devices_are_refused():
    with pytest.raises(TopologyError, match="128 NeuronCores are visible.*at most 127.*NEURON_LOGICAL_NC_CONFIG=2"):
        discover({"NEURON_LOGICAL_NC_CONFIG": "1"})                  # trn2.48xlarge at LNC=1: 128 cores
    assert discover({"NEURON_LOGICAL_NC_CONFIG": "1", "NEURON_RT_VISIBLE_CORES": "0-126"}).device_count == 127


SHARED_BANK = r"""
import torch
GiB = 1 << 30
bank = torch.neuron.mem_get_info(0)[1]
a = torch.empty(int(bank * 0.7), dtype=torch.uint8, device="neuron:0")   # more than half: the neighbour is idle
print("free on the neighbour", torch.neuron.mem_get_info(1)[0] == bank - a.numel())
try:
    torch.empty(int(bank * 0.4), dtype=torch.uint8, device="neuron:1")
except torch.OutOfMemoryError as e:
    print("OOM", "neighbour sharing its bank" in str(e), "neuron:0 (NeuronCore 0" in str(e))
b = torch.empty(int(bank * 0.4), dtype=torch.uint8, device="neuron:2")   # another pair's bank is untouched
del a
c = torch.empty(int(bank * 0.4), dtype=torch.uint8, device="neuron:1")   # the bank came back
print("ok")
"""


def test_lnc1_pair_shares_one_bank():
    r = run_python(SHARED_BANK, env={"NEURON_LOGICAL_NC_CONFIG": "1", "NEURON_RT_NUM_CORES": "4"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["free on the neighbour True", "OOM True True", "ok"]


# ---- core selection --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,cores", [("3", (3,)), ("0-3", (0, 1, 2, 3)), (" 4-5 ", (4, 5))])
def test_visible_cores_one_core_or_a_contiguous_range(spec, cores):
    assert discover({"NEURON_RT_VISIBLE_CORES": spec}).visible == cores


@pytest.mark.parametrize("spec", ["0,2,4-5", "3,5,6", "0-1,2-3", "3-1"])
def test_visible_cores_lists_and_decreasing_ranges_are_rejected(spec):
    with pytest.raises(TopologyError, match=r"one core \(\"3\"\) or one contiguous, increasing range"):
        discover({"NEURON_RT_VISIBLE_CORES": spec})


def test_visible_cores_wins_over_num_cores_and_num_cores_0_means_all():
    assert discover({"NEURON_RT_VISIBLE_CORES": "2-3", "NEURON_RT_NUM_CORES": "8"}).visible == (2, 3)
    assert discover({"NEURON_RT_NUM_CORES": "0"}).device_count == 64


LAUNCHED_RANK = r"""
import os, torch
count = torch.neuron.device_count()  # the runtime starts here and sets NEURON_RT_VISIBLE_CORES=LOCAL_RANK
print("visible", os.environ["NEURON_RT_VISIBLE_CORES"], "count", count, "current", torch.neuron.current_device())
x = torch.ones(2, device="neuron:1")
print("own", x.device, torch.neuron.get_device_properties(1).core_id)
try:
    torch.ones(2, device="neuron:0")
except Exception as e:
    print("sibling", "not attached to this process" in str(e), "neuron:1" in str(e))
from accelerate.utils import get_max_memory
print("device_map auto sees", [k for k in get_max_memory() if isinstance(k, int)])
"""


def test_a_launched_rank_sees_only_its_own_core():
    env = {"LOCAL_RANK": "1", "RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
    r = run_python(LAUNCHED_RANK, env={**env, "NEURON_RT_VISIBLE_CORES": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["visible 1 count 2 current 1", "own neuron:1 1", "sibling True True",
                                     "device_map auto sees [1]"]


# ---- core ownership --------------------------------------------------------------------------------------------

HOLDER = r"""
import os, sys, time, torch
x = torch.ones(1 << 20, dtype=torch.uint8, device="neuron:0")      # first use: this process takes core 0
print("holding", os.getpid(), flush=True)
time.sleep(120)
"""

SECOND = r"""
import torch
try:
    torch.ones(1, device="neuron:0")
    print("got core 0")
except RuntimeError as e:
    print("refused:", str(e).replace("\n", " "))
print("core 1", torch.ones(1, device="neuron:1").device)
"""


def _start_holder(env):
    import subprocess
    import sys
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True, env=env)
    line = holder.stdout.readline()
    assert line.startswith("holding"), line
    return holder, int(line.split()[1])


@pytest.mark.slow
def test_a_core_is_exclusive_to_the_process_that_first_used_it(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    env = {**os.environ, "TORCHNEURON_CORE_REGISTRY": str(tmp_path / "cores"), "COLUMNS": "200"}
    holder, pid = _start_holder(env)
    try:
        r = run_python(SECOND, env=env)
        assert r.returncode == 0, r.stderr
        refused, other = r.stdout.splitlines()
        assert refused.startswith("refused: neuron:0 (NeuronCore 0 of trn2.48xlarge) is held by process "
                                  f"{pid}") and "NEURON_RT_VISIBLE_CORES" in refused
        assert other == "core 1 neuron:1"                            # other cores stay free
        # a job at LNC=1 asking for physical core 1 collides with the LNC=2 holder of logical core 0
        r = run_python(SECOND, env={**env, "NEURON_LOGICAL_NC_CONFIG": "1", "NEURON_RT_VISIBLE_CORES": "1-2"})
        assert "refused: neuron:0 (NeuronCore 1 of trn2.48xlarge) is held by process" in r.stdout, r.stderr
        from torch_neuronx.runtime import held_cores
        held = held_cores("trn2.48xlarge", env=env)
        assert [(h.core, h.physical_cores, h.pid, h.hbm_in_use) for h in held] == [(0, (0, 1), pid, 1 << 20)]
        ls = subprocess.run([sys.executable, "-m", "torch_neuronx.cli", "ls"], capture_output=True, text=True,
                            env=env)
        assert ls.returncode == 0, ls.stderr
        row = next(line for line in ls.stdout.splitlines() if "neuron:0 " in line)
        assert f"pid {pid}" in row and "1.0 MiB" in row
    finally:
        holder.send_signal(signal.SIGKILL)                            # a killed holder never blocks the next job
        holder.wait()
    r = run_python(SECOND, env=env)
    assert r.stdout.splitlines()[0] == "got core 0", r.stdout + r.stderr


NUM_CORES = r"""
import torch
from torch_neuronx.runtime import TopologyError
try:
    torch.ones(1, device="neuron:0")                              # first device use raises a bad topology
    cores = [torch.neuron.get_device_properties(i).core_id for i in range(torch.neuron.device_count())]
    for i in range(len(cores)):
        torch.ones(1, device=f"neuron:{i}")                       # each core is usable: none is held
    print("cores", cores)
except (RuntimeError, TopologyError) as e:
    print("refused:", str(e).replace("\n", " "))
"""


@pytest.mark.slow
def test_num_cores_reserves_free_cores(tmp_path):
    # Runtime configuration guide: a reserved core cannot be used by another process; NEURON_RT_NUM_CORES=N
    # asks the runtime for N cores, which it takes among the free ones.
    import os
    import signal
    env = {**os.environ, "TORCHNEURON_CORE_REGISTRY": str(tmp_path / "cores")}
    holder, pid = _start_holder(env)                                 # holds core 0
    try:
        r = run_python(NUM_CORES, env={**env, "NEURON_RT_NUM_CORES": "2"})
        assert r.stdout.strip() == "cores [1, 2]", r.stdout + r.stderr
        r = run_python(NUM_CORES, env={**env, "NEURON_RT_NUM_CORES": "64"})   # all 64 cores: one is held
        assert r.stdout.startswith("refused: NEURON_RT_NUM_CORES=64") and f"process {pid}" in r.stdout, \
            r.stdout + r.stderr
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    r = run_python(NUM_CORES, env={**env, "NEURON_RT_NUM_CORES": "2"})        # the killed holder's core is free
    assert r.stdout.strip() == "cores [0, 1]", r.stdout + r.stderr


def test_boolean_runtime_variables_take_0_1_false_true():
    # Neuron runtime environment-variable reference: "Boolean variables accept 0, 1, false, or true,
    # case-insensitively"; anything else is an error at first device use, not a silent default.
    for raw, on in (("1", True), ("TRUE", True), ("0", False), ("false", False), ("", False)):
        assert discover({"NEURON_RT_STOCHASTIC_ROUNDING_EN": raw}).stochastic_rounding is on
    with pytest.raises(TopologyError, match="NEURON_RT_STOCHASTIC_ROUNDING_EN='2'.*0 or 1"):
        discover({"NEURON_RT_STOCHASTIC_ROUNDING_EN": "2"})
    r = run_python("import torch\ntry:\n    torch.ones(1, device='neuron')\nexcept RuntimeError as e:\n    print(e)",
                   env={"NEURON_RT_STOCHASTIC_ROUNDING_EN": "yes"})
    assert "NEURON_RT_STOCHASTIC_ROUNDING_EN='yes'" in r.stdout, r.stdout + r.stderr


def test_integer_variables_name_the_variable_with_the_callers_error(monkeypatch):
    from torch_neuronx.distributed.device_binding import RankBindingError, rank_device
    with pytest.raises(TopologyError, match="NEURON_RT_NUM_CORES='two' is not a whole number"):
        discover({"NEURON_RT_NUM_CORES": "two"})
    monkeypatch.setenv("LOCAL_RANK", "first")
    with pytest.raises(RankBindingError, match="LOCAL_RANK='first' is not a whole number; it is set by the launcher"):
        rank_device(strict=True)


def test_core_registry_must_be_private(tmp_path):
    import os
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    r = run_python("import torch\ntry:\n    torch.ones(1, device='neuron')\nexcept RuntimeError as e:\n    print(e)",
                   env={"TORCHNEURON_CORE_REGISTRY": str(shared)})
    assert "ownership registry" in r.stdout and "writable by all users" in r.stdout, r.stdout + r.stderr


# ---- collective groups -----------------------------------------------------------------------------------------

def test_valid_collective_group_sizes_per_platform():
    from torch_neuronx.runtime import valid_collective_group_sizes
    assert valid_collective_group_sizes("trn1.32xlarge") == [1, 2, 8, 16, 32]
    assert valid_collective_group_sizes("trn1.32xlarge", up_to=96)[-3:] == [32, 64, 96]
    assert valid_collective_group_sizes("inf2.48xlarge") == list(range(1, 25))
    assert valid_collective_group_sizes("trn2.48xlarge") == list(range(1, 65))


GROUP_OF_24 = r"""
import tempfile, torch, torch.distributed as dist
try:
    dist.init_process_group("neuron", store=dist.FileStore(tempfile.mktemp(), 24), rank=0, world_size=24)
except Exception as e:
    print(type(e).__name__, e)
"""


def test_trn1_refuses_an_unsupported_collective_group_at_creation():
    r = run_python(GROUP_OF_24, env={"TORCHNEURON_INSTANCE": "trn1.32xlarge"}, timeout=120)
    assert "CollectiveTopologyError Unsupported topology: a job of 24 ranks on trn1.32xlarge" in r.stdout
    assert "1, 2, 8, 16 or a multiple of 32" in r.stdout, r.stdout + r.stderr


SUBGROUPS_OF_FOUR = r"""
import torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
dist.init_process_group("neuron")
rank = dist.get_rank()
mesh = init_device_mesh("neuron", (4, 2), mesh_dim_names=("dp", "tp"))   # DP groups of 4 ranks strided by TP
for dim in ("dp", "tp"):
    ranks = dist.get_process_group_ranks(mesh.get_group(dim))
    x = torch.full((3,), float(rank), device="neuron")
    dist.all_reduce(x, group=mesh.get_group(dim))
    assert x.cpu().tolist() == [float(sum(ranks))] * 3, (dim, ranks, x)
print("OK", rank, len(dist.get_process_group_ranks(mesh.get_group("dp"))), flush=True)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_trn1_runs_groups_of_four_inside_a_world_it_accepts(tmp_path):
    """AWS runs TP 8 x DP 4 on a trn1.32xlarge: the collective rule counts the job's cores, not each group's. An
    8-rank job (a world trn1 accepts) with a (DP 4, TP 2) DeviceMesh creates its DP groups of 4 and all-reduces
    over them with the sums a CPU computes."""
    import subprocess
    import sys

    from test_distributed_launch import dist_env, free_port
    script = tmp_path / "subgroups.py"
    script.write_text(SUBGROUPS_OF_FOUR)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=8", "--master-addr=127.0.0.1",
           f"--master-port={free_port()}", "--max-restarts=0", "--monitor-interval=0.5", str(script)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                       env=dist_env(TORCHNEURON_INSTANCE="trn1.32xlarge"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    assert sorted(line.split()[1] for line in r.stdout.splitlines() if line.startswith("OK")) == list("01234567")
    assert all(line.endswith(" 4") for line in r.stdout.splitlines() if line.startswith("OK")), r.stdout


# ---- the TRL CLI on the default instance -----------------------------------------------------------------------

@pytest.mark.slow
def test_trl_cli_sft_with_torch_compile_trains_under_accelerate_launch(tmp_path):
    """`trl sft ... --torch_compile true --packing true --packing_strategy wrapped` launches one process per core
    through `accelerate launch`; TRL loads the model with device_map="auto" in each rank. Each rank holds only its
    own core, so the model lands there and training runs (2 processes: as few as CI can afford)."""
    import json
    import os
    import subprocess
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples"))
    import hf_common

    model = hf_common.build_causal_lm(str(tmp_path / "model"))
    data = tmp_path / "data"
    data.mkdir()
    with open(data / "train.jsonl", "w") as f:
        for text in hf_common.sample_texts(48):
            f.write(json.dumps({"text": text}) + "\n")
    trl = os.path.join(os.path.dirname(sys.executable), "trl")
    cmd = [trl, "sft", "--model_name_or_path", model, "--dataset_name", str(data), "--torch_compile", "true",
           "--packing", "true", "--packing_strategy", "wrapped", "--max_length", "64", "--max_steps", "2",
           "--per_device_train_batch_size", "2", "--logging_steps", "1", "--save_strategy", "no",
           "--report_to", "none", "--output_dir", str(tmp_path / "out"), "--num_processes", "2",
           "--main_process_port", str(_free_port())]
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                                            "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES")}
    env.update({"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    assert "device_map='auto'` in any distributed mode" not in out
    losses = [json.loads(line.replace("'", '"'))["loss"] for line in out.splitlines()
              if line.startswith("{") and "'loss'" in line]
    assert len(losses) == 2 and all(x == x for x in losses), out[-3000:]


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
