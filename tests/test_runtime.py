"""The emulated runtime: instance types, visible cores, HBM budgets, OOM, clear errors for bad settings."""

import os
import subprocess
import sys

import pytest
import torch

from helpers import run_python, discover
from torch_neuronx.runtime import GiB, TopologyError


RESERVE = 96 << 20  # the runtime's share of HBM per physical core


@pytest.mark.parametrize("instance,cores,bank_gib,physical_per_bank", [
    ("trn1.2xlarge", 2, 16, 1), ("trn1.32xlarge", 32, 16, 1), ("inf2.xlarge", 2, 16, 1), ("inf2.48xlarge", 24, 16, 1),
    ("trn2.48xlarge", 64, 24, 2), ("trn2.3xlarge", 4, 24, 2), ("trn3-gen1", 64, 36, 2), ("trn3-gen2", 16, 36, 2),
])
def test_instance_shapes(instance, cores, bank_gib, physical_per_bank):
    t = discover({"TORCHNEURON_INSTANCE": instance})
    assert t.device_count == cores and t.hbm_per_core == bank_gib * GiB - physical_per_bank * RESERVE


def test_default_instance_is_what_the_host_can_run():
    """Without TORCHNEURON_INSTANCE: a trn2.48xlarge (64 ranks, one per core) only on a host that can run them."""
    from torch_neuronx.runtime import default_instance
    assert default_instance((2, 24 * GiB)) == "trn2.3xlarge"          # this kind of machine: 4 cores
    assert default_instance((16, 512 * GiB)) == "trn2.3xlarge"        # RAM enough, CPUs too few for 64 ranks
    assert default_instance((96, 64 * GiB)) == "trn2.3xlarge"         # CPUs enough, RAM too little
    assert default_instance((64, 256 * GiB)) == "trn2.48xlarge"
    t = discover({"TORCHNEURON_INSTANCE": "trn2.48xlarge"})           # every named instance stays available
    assert (t.instance.name, t.lnc, t.device_count, t.instance.core_version) == ("trn2.48xlarge", 2, 64, "v3")


def test_default_instance_is_said_once_at_first_use():
    code = """
import torch
print("imported")
torch.ones(1, device="neuron")
torch.ones(1, device="neuron")
from torch_neuronx.runtime import default_instance
print("device_count", torch.neuron.device_count(), "default", default_instance())
"""
    env = {k: v for k, v in os.environ.items() if k != "TORCHNEURON_INSTANCE"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    from torch_neuronx.runtime import INSTANCES, default_instance
    name = default_instance()
    assert f"device_count {INSTANCES[name].cores(2)} default {name}" in r.stdout
    said = [line for line in r.stderr.splitlines() if line.startswith("TorchNeuron: emulating")]
    assert len(said) == 1 and name in said[0] and "TORCHNEURON_INSTANCE" in said[0], r.stderr
    r = run_python(code, env={"TORCHNEURON_INSTANCE": "trn2.3xlarge"})  # an explicit choice is not announced
    assert r.returncode == 0 and "TorchNeuron: emulating" not in r.stderr and "device_count 4" in r.stdout, r.stderr


def test_logical_core_config_on_trn2_and_trn3():
    t = discover({"TORCHNEURON_INSTANCE": "trn3-gen2", "NEURON_LOGICAL_NC_CONFIG": "1"})
    assert t.device_count == 32 and t.shared_bank and t.bank_of(4) == t.bank_of(5) != t.bank_of(6)
    with pytest.raises(TopologyError, match="must be 1 or 2"):
        discover({"TORCHNEURON_INSTANCE": "trn2.48xlarge", "NEURON_LOGICAL_NC_CONFIG": "4"})
    with pytest.raises(TopologyError, match="Trainium2 and Trainium3 only"):
        discover({"TORCHNEURON_INSTANCE": "trn1.2xlarge", "NEURON_LOGICAL_NC_CONFIG": "2"})


def test_visible_cores_and_num_cores(tmp_path):
    t = discover({"NEURON_RT_VISIBLE_CORES": "4-7"})
    assert t.visible == (4, 5, 6, 7) and t.device_count == 4
    assert t.label(3) == "neuron:3 (NeuronCore 7 of trn2.48xlarge)"
    # N free cores: an empty ownership registry holds none (tests/test_fidelity_runtime.py: held cores)
    assert discover({"NEURON_RT_NUM_CORES": "3", "TORCHNEURON_CORE_REGISTRY": str(tmp_path)}).visible == (0, 1, 2)


@pytest.mark.parametrize("env,match", [
    ({"TORCHNEURON_INSTANCE": "trn9.huge"}, "not a known Neuron instance type"),
    ({"NEURON_RT_VISIBLE_CORES": "0-70"}, r"names core\(s\) \[64,"),
    ({"NEURON_RT_VISIBLE_CORES": "a-b"}, "is not a core id or range"),
    ({"NEURON_RT_NUM_CORES": "99"}, r"ask for 1..64 \(0 means all\)"),
    ({"TORCHNEURON_HBM_PER_CORE": "lots"}, "is not a size"),
    ({"TORCHNEURON_HBM_PER_CORE": "24GiB"}, "can only shrink"),
])
def test_bad_environment_is_named(env, match):
    with pytest.raises(TopologyError, match=match):
        discover(env)


def test_bad_environment_keeps_import_torch_working_and_errors_on_use():
    r = run_python("import torch\n"
                   "print(torch.neuron.is_available(), torch.neuron.device_count())\n"
                   "try:\n    torch.ones(1, device='neuron')\nexcept Exception as e:\n    print('ERR', e)\n",
                   env={"NEURON_RT_VISIBLE_CORES": "0-99"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "False 0"
    assert "NEURON_RT_VISIBLE_CORES='0-99'" in lines[1] and "64 cores" in lines[1]


def test_visible_cores_in_a_process():
    r = run_python("import torch; p = torch.neuron.get_device_properties(1);"
                   "print(torch.neuron.device_count(), p.core_id, p.name, p.total_memory)",
                   env={"NEURON_RT_VISIBLE_CORES": "2-3", "TORCHNEURON_INSTANCE": "trn2.48xlarge"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "3", "Trainium2", "NeuronCore-v3", str(24 * GiB - 2 * RESERVE)]


def test_oom_names_core_request_and_budget_and_process_survives():
    free_before = torch.neuron.mem_get_info(0)[0]
    with pytest.raises(torch.OutOfMemoryError, match=r"neuron:0 \(NeuronCore 0 of trn2.48xlarge\).*24.00 GiB.*23.81 GiB"):
        torch.empty(24 * GiB, dtype=torch.uint8, device="neuron")
    assert torch.neuron.mem_get_info(0)[0] == free_before
    assert torch.neuron.memory_stats()["num_ooms"] >= 1
    assert torch.ones(4, device="neuron").sum().item() == 4


HOST_BACKING_SCRIPT = r"""
import torch
GiB = 1 << 30
available = int(open("/proc/meminfo").read().split("MemAvailable:")[1].split()[0]) * 1024
want = available + GiB
budget = torch.neuron.mem_get_info(0)[0]
print("fits budget", want <= budget)
try:
    torch.empty(want, dtype=torch.uint8, device="neuron")
    print("allocated")
except torch.OutOfMemoryError as e:
    print("OOM", e)
print("after", torch.neuron.memory_allocated(0), torch.ones(4, device="neuron").sum().item())
"""


def test_allocation_the_host_cannot_back_fails_clearly_instead_of_the_oom_killer():
    """Device memory is host RAM: a request within the core's budget but beyond the host's available RAM
    (Transformers' continuous batching sizes its cache from host RAM on neuron) is refused with the cause
    and the fix, and nothing is taken, instead of the kernel killing the process while it is filled.
    trn3's 36 GiB bank is larger than this machine's RAM (a host with more RAM than that cannot show it)."""
    r = run_python(HOST_BACKING_SCRIPT, env={"TORCHNEURON_INSTANCE": "trn3-gen2", "NEURON_RT_VISIBLE_CORES": "0"})
    assert r.returncode == 0, r.stderr
    if "fits budget False" in r.stdout:
        pytest.skip("this host has more RAM available than a trn3 core's HBM budget: nothing to refuse")
    assert "allocated" not in r.stdout.splitlines()
    assert "OOM Neuron emulator out of host memory on neuron:0 (NeuronCore 0 of trn3-gen2)" in r.stdout, r.stdout
    assert "ContinuousBatchingConfig(num_blocks=...)" in r.stdout and "TORCHNEURON_HBM_PER_CORE" in r.stdout
    assert "after 0 4.0" in r.stdout


OOM_SCRIPT = r"""
import torch
MiB = 1 << 20
torch.neuron.reset_peak_memory_stats()
base = torch.neuron.memory_allocated()
a = torch.empty(40 * MiB, dtype=torch.uint8, device="neuron")
assert torch.neuron.memory_allocated() == base + 40 * MiB
try:
    b = torch.empty(40 * MiB, dtype=torch.uint8, device="neuron")
    raise SystemExit("expected OOM")
except torch.OutOfMemoryError as e:
    print("OOM", str(e).split(";")[0])
assert torch.neuron.memory_allocated() == base + 40 * MiB      # the refused request left no trace
c = a[: 2 * MiB].float()                                       # a host kernel's output is counted too
assert torch.neuron.memory_allocated() == base + 48 * MiB
del a, c
assert torch.neuron.memory_allocated() == base
b = torch.empty(60 * MiB, dtype=torch.uint8, device="neuron")  # memory came back
assert torch.neuron.max_memory_allocated() == base + 60 * MiB
print("free", torch.neuron.mem_get_info()[0] == 64 * MiB - 60 * MiB - base, "other core", torch.neuron.memory_allocated(1))
"""


def test_oom_accounting_is_exact_under_a_small_budget():
    r = run_python(OOM_SCRIPT, env={"TORCHNEURON_HBM_PER_CORE": "64MiB"})
    assert r.returncode == 0, r.stderr
    assert "OOM Neuron out of memory on neuron:0 (NeuronCore 0 of trn2.48xlarge): tried to allocate 40.00 MiB" in r.stdout
    assert "free True other core 0" in r.stdout


def test_fp64_modes():
    import torch_neuronx
    x = torch.ones(3, dtype=torch.float64, device="neuron")
    try:
        torch_neuronx.set_fp64_mode("error")
        with pytest.raises(RuntimeError, match="float64 is not supported by NeuronCore.*TORCHNEURON_FP64"):
            x + 1
        assert (torch.ones(3, device="neuron") + 1).sum().item() == 6  # float32 unaffected
        torch_neuronx.set_fp64_mode("warn")
        with pytest.warns(UserWarning, match="no fp64 datapath"):
            x * 2
        torch_neuronx.set_fp64_mode("exact")
        assert (x + 1).sum().item() == 6.0
    finally:
        torch_neuronx.set_fp64_mode(torch_neuronx.dtypes.DEFAULT_FP64)
    with pytest.raises(ValueError, match="choose one of"):
        torch_neuronx.set_fp64_mode("sometimes")


def test_cli_ls_and_info():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "torch_neuronx.cli", "ls"], capture_output=True, text=True,
                       env={**__import__("os").environ, "TORCHNEURON_INSTANCE": "inf2.xlarge", "COLUMNS": "160"})
    assert r.returncode == 0, r.stderr
    assert "inf2.xlarge" in r.stdout and "neuron:1" in r.stdout and "15.91 GiB" in r.stdout
    assert "Trn2 and Trn3 only" in r.stdout
    r = subprocess.run([sys.executable, "-m", "torch_neuronx.cli", "info"], capture_output=True, text=True,
                       env={**__import__("os").environ, "COLUMNS": "160"})
    assert r.returncode == 0, r.stderr
    assert "torch-neuronx" in r.stdout and "2.13.0" in r.stdout
    r = subprocess.run([sys.executable, "-m", "torch_neuronx.cli", "ls"], capture_output=True, text=True,
                       env={**__import__("os").environ, "TORCHNEURON_INSTANCE": "nope"})
    assert r.returncode == 2 and "not a known Neuron instance type" in r.stdout


def test_live_allocations_stay_exact_through_growth_and_random_frees():
    # The runtime's table of live allocations (csrc/runtime/BlockTable.h) starts small, grows, and deletes by
    # shifting probe runs: thousands of blocks freed in random order must leave exactly the survivors, in the
    # accounting and in the memory snapshot, and a storage must still free after neighbours moved around it.
    import random
    rng = random.Random(0)
    base = torch.neuron.memory_allocated(0)
    before = {s["address"] for s in torch.neuron.memory._snapshot()["segments"]}
    tensors = [torch.empty(rng.randrange(1, 300), device="neuron", dtype=torch.uint8) for _ in range(5000)]
    for _ in range(3):
        rng.shuffle(tensors)
        del tensors[: len(tensors) // 2]
        tensors += [torch.empty(rng.randrange(1, 300), device="neuron", dtype=torch.uint8) for _ in range(1000)]
        live = {t.data_ptr(): t.numel() for t in tensors}
        assert torch.neuron.memory_allocated(0) - base == sum(live.values())
        segments = {s["address"]: s["total_size"] for s in torch.neuron.memory._snapshot()["segments"] if s["address"] not in before}
        assert segments == live
    del tensors
    assert torch.neuron.memory_allocated(0) == base


def _asan_loaded() -> bool:
    """scripts/sanitize.sh preloads libasan; its build keeps no freed blocks (a use after free must fault)."""
    with open("/proc/self/maps") as maps:
        return "libasan" in maps.read()


def test_freed_host_blocks_are_reused_and_counted_on_no_core():
    # The emulator keeps freed host blocks for reuse (csrc/runtime/HostBlockCache.h): the block of the size
    # just freed comes back first, the counts see live tensors only, and empty_cache returns the cache.
    from torch_neuronx import runtime
    torch.neuron.empty_cache()
    assert runtime.cached_host_bytes() == 0
    base = torch.neuron.memory_allocated(0)
    x = torch.full((1000,), 3.0, device="neuron")
    ptr = x.data_ptr()
    del x
    assert torch.neuron.memory_allocated(0) == base and torch.neuron.memory_reserved(0) == base
    free, total = torch.neuron.mem_get_info(0)
    assert free == total - torch.neuron.memory_allocated(0)
    if _asan_loaded():
        assert runtime.cached_host_bytes() == 0
        return
    assert runtime.cached_host_bytes() == 4096  # 4000 bytes, rounded up to the cache's 256-byte granule
    y = torch.empty(1000, device="neuron")
    assert y.data_ptr() == ptr and runtime.cached_host_bytes() == 0
    y.copy_(torch.arange(1000, dtype=torch.float32))
    assert torch.equal((y * 2).cpu(), torch.arange(1000, dtype=torch.float32) * 2)
    cached = runtime.cached_host_bytes()  # the product's block
    big = torch.empty(5 << 20, dtype=torch.uint8, device="neuron")
    del big  # blocks over 4 MiB go back to the host at once
    assert runtime.cached_host_bytes() == cached
    many = [torch.empty(1 << 20, dtype=torch.uint8, device="neuron") for _ in range(200)]
    del many, y
    assert runtime.cached_host_bytes() <= 128 << 20  # bounded: the rest went back to the host
    torch.neuron.empty_cache()
    assert runtime.cached_host_bytes() == 0
    assert torch.neuron.memory_allocated(0) == base


CACHED_OOM_SCRIPT = r"""
import torch
from torch_neuronx import runtime
MiB = 1 << 20
def fill():
    blocks = []
    try:
        while True:
            blocks.append(torch.empty(MiB, dtype=torch.uint8, device="neuron"))
    except torch.OutOfMemoryError:
        return blocks
first = fill()
n = len(first)
del first
cached = runtime.cached_host_bytes()
second = fill()
print("blocks", n, len(second), "cached", cached > 0, "allocated", torch.neuron.memory_allocated() == len(second) * MiB)
"""


def test_cached_blocks_do_not_move_the_out_of_memory_point():
    # A core runs out at the same byte with a full cache of freed blocks as with none: the cache is host
    # memory, never HBM (what fails on Trainium fails here, at the same allocation).
    r = run_python(CACHED_OOM_SCRIPT, env={"TORCHNEURON_HBM_PER_CORE": "64MiB"})
    assert r.returncode == 0, r.stderr
    n = int(r.stdout.split()[1])
    assert n > 50 and f"blocks {n} {n} cached True allocated True" in r.stdout, r.stdout
