"""torchneuron plan, and the layouts it plans running for real. Here: the tensor-parallel-only layout's optimizer step
(AdamW's foreach default with parameters that mix DTensor and plain tensors, torch_neuronx/integrations/optim_foreach.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from helpers import ROOT, run_python


def test_optimizer_with_mixed_dtensor_and_plain_parameters_on_neuron():
    """One rank, a 1-core mesh: AdamW's default (foreach) updates a group mixing a DTensor and a plain parameter
    one tensor at a time, as on CPU, with CPU's result; foreach=True gets the cause and the workaround."""
    r = run_python("""
import os, warnings, torch, torch.distributed as dist
from torch.distributed.tensor import distribute_tensor, Replicate, DTensor
from torch.distributed.device_mesh import init_device_mesh
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29700 + os.getpid() % 200))
dist.init_process_group("neuron", rank=0, world_size=1)
mesh = init_device_mesh("neuron", (1,))
torch.manual_seed(0)
w, b = torch.randn(4, 4), torch.randn(4)
def run(device, foreach=None):
    if device == "neuron":
        pw = torch.nn.Parameter(distribute_tensor(w.to(device), mesh, [Replicate()]))
    else:
        pw = torch.nn.Parameter(w.clone())
    pb = torch.nn.Parameter(b.to(device))
    opt = torch.optim.AdamW([pw, pb], lr=0.1, foreach=foreach)
    x = torch.arange(4.0).to(device)
    for _ in range(3):
        full = pw.full_tensor() if isinstance(pw, DTensor) else pw  # differentiable: pw.grad is a DTensor
        loss = ((full @ x + pb * x) ** 2).sum()
        loss.backward()
        opt.step(); opt.zero_grad()
    full = pw.full_tensor() if isinstance(pw, DTensor) else pw
    return full.detach().cpu(), pb.detach().cpu(), opt.param_groups[0]["foreach"]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    nw, nb, foreach = run("neuron")
cw, cb, _ = run("cpu")
assert foreach is False, foreach
assert any("one tensor at a time" in str(c.message) for c in caught), [str(c.message) for c in caught]
torch.testing.assert_close(nw, cw); torch.testing.assert_close(nb, cb)
try:
    run("neuron", foreach=True)
    raise AssertionError("foreach=True with mixed parameters did not raise")
except RuntimeError as e:
    assert "mixes DTensor and plain tensor parameters" in str(e) and "foreach=False" in str(e), e
dist.destroy_process_group()
print("OK")
""")
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]


TP_ONLY_SCRIPT = """
import json, os, sys, torch
from transformers import AutoModelForCausalLM
model_dir, out, device = sys.argv[1], sys.argv[2], sys.argv[3]
kwargs = {}
if device == "neuron":  # the user's torchrun run: the same script, sharded by Transformers at load
    from transformers.distributed import DistributedConfig
    kwargs = dict(distributed_config=DistributedConfig(tp_size=4, fsdp_size=1))
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, **kwargs)
if device == "cpu":
    model = model.to("cpu")
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids = (torch.arange(2 * 32).reshape(2, 32) * 7 % 256).to(model.device)
losses = []
for _ in range(3):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(loss.item())
from torch.distributed.tensor import DTensor
kinds = sorted({type(p).__name__ for p in model.parameters()})
if int(os.environ.get("RANK", "0")) == 0:
    with open(out, "w") as f:
        json.dump(dict(losses=losses, kinds=kinds, device=str(model.device),
                       foreach=optimizer.param_groups[0]["foreach"]), f)
"""


@pytest.mark.slow
def test_tp_only_from_pretrained_trains_with_adamw_under_torchrun(tmp_path):
    """The issue's script: from_pretrained(distributed_config=DistributedConfig(tp_size=4, fsdp_size=1)) under
    torchrun on 4 ranks, then torch.optim.AdamW(model.parameters()) with its defaults: it trains on neuron (the
    model mixes DTensor and plain parameters) with the losses of the same script on CPU in one process."""
    from helpers import tiny_llama
    tiny_llama(num_key_value_heads=4).save_pretrained(tmp_path / "model")
    script = tmp_path / "train.py"
    script.write_text(TP_ONLY_SCRIPT)
    cpu = subprocess.run([sys.executable, str(script), str(tmp_path / "model"), str(tmp_path / "cpu.json"), "cpu"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert cpu.returncode == 0, cpu.stderr[-4000:]
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
                        str(script), str(tmp_path / "model"), str(tmp_path / "neuron.json"), "neuron"],
                       capture_output=True, text=True, cwd=ROOT, timeout=900, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-6000:]
    got, want = json.loads((tmp_path / "neuron.json").read_text()), json.loads((tmp_path / "cpu.json").read_text())
    assert got["device"].startswith("neuron") and got["kinds"] == ["DTensor", "Parameter"], got
    assert got["foreach"] is False, got                    # the per-tensor loop, as on CPU
    assert want["foreach"] is None and want["kinds"] == ["Parameter"], want
    torch.testing.assert_close(torch.tensor(got["losses"]), torch.tensor(want["losses"]), rtol=1e-4, atol=1e-4)


# ---- torchneuron plan -------------------------------------------------------------------------------------------

GIB = 1 << 30
# One decoder layer with a very wide MLP: 2.46 B parameters whose AdamW step does not fit one 16 GiB trn1 core,
# fits two cores with TP=2, and does not fit two with FSDP=2 (FSDP gathers the one layer whole). Tiny activations.
WIDE = dict(model_type="llama", hidden_size=4096, intermediate_size=196608, num_hidden_layers=1, num_attention_heads=32,
            num_key_value_heads=8, vocab_size=128, max_position_embeddings=512, tie_word_embeddings=False)
TINY = dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=8,
            num_key_value_heads=4, vocab_size=512, max_position_embeddings=512, tie_word_embeddings=False)


def _config(tmp_path, cfg, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return str(path)


def _plan_cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "torch_neuronx.cli", "plan", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"))


def test_plan_cli_preset_json():
    """A bundled preset at full size (Mistral 7B, TP=8 x FSDP=8 on trn2.48xlarge): the numbers are the model's, the
    categories sum to the total, the estimate is labelled and positive."""
    r = _plan_cli("--model", "mistral-7b", "--instance", "trn2.48xlarge", "--tp", "8", "--fsdp", "8", "--seq", "256",
                  "--json")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    p = json.loads(r.stdout)
    assert (p["tp"], p["fsdp"], p["cores"], p["hbm_per_core"], p["lnc"]) == (8, 8, 64, 24 * GIB, 2)
    assert 7.2e9 < p["parameters"] < 7.3e9, p["parameters"]          # Mistral-7B-v0.3: 7.25 B
    cats = p["by_category"]
    assert sum(cats.values()) == p["peak_per_core"]
    assert cats["runtime_reserve"] == 2 * 96 * 2**20                    # the emulator's 96 MiB per physical core, LNC=2
    shard = 2 * p["parameters"] / 64                                   # bf16 parameters over 64 cores
    assert 0.95 * shard < cats["parameters"] < 1.1 * shard, (cats["parameters"], shard)
    assert 1.9 * shard < cats["optimizer_state"] < 2.2 * shard         # AdamW: two moments in the parameter dtype
    assert cats["activations"] > 0 and cats["collective_buffers"] > 0
    assert p["fits"] and p["margin_bytes"] == p["hbm_per_core"] - p["peak_per_core"]
    e = p["estimate"]
    assert e["label"] == "estimate" and e["assumptions"]
    assert e["step_seconds"] >= e["compute_seconds"] > 0 and e["collective_seconds"] > 0
    assert e["tokens_per_step"] == 256 * 8 and e["tokens_per_second"] > 0


def test_plan_bad_inputs(tmp_path):
    """Heads TP does not divide, an unknown instance, an unknown model, a model that is not a causal LM, a degree
    of 0, a world the platform cannot run, a layout that leaves cores of a multi-instance job idle: exit 1 with what
    works."""
    r = _plan_cli("--model", "qwen2.5-7b", "--instance", "trn2.48xlarge", "--tp", "8")
    assert r.returncode == 1, r.stderr
    assert "28 attention heads" in r.stderr and "4 key/value heads" in r.stderr, r.stderr
    assert "TP degrees that work on this instance: 1, 2, 4" in r.stderr, r.stderr
    r = _plan_cli("--model", "llama-3.1-8b", "--instance", "trn9.colossal")
    assert r.returncode == 1 and "'trn9.colossal' is not a known Neuron instance type" in r.stderr, r.stderr
    assert "trn1.32xlarge" in r.stderr and "trn2.48xlarge" in r.stderr, r.stderr
    r = _plan_cli("--model", "no-such-model", "--instance", "trn2.48xlarge")
    assert r.returncode == 1 and "llama-3.1-70b" in r.stderr and "mixtral-8x7b" in r.stderr, r.stderr
    r = _plan_cli("--model", _config(tmp_path, {"model_type": "vit"}), "--instance", "trn2.48xlarge")
    assert r.returncode == 1 and "model_type 'vit' has no causal-LM class" in r.stderr, r.stderr
    r = _plan_cli("--model", "llama-3.1-8b", "--tp", "0")
    assert r.returncode == 1 and "--tp and --fsdp must be positive" in r.stderr, r.stderr
    # the job's world: the runtime's rule (torch_neuronx/runtime/collective_groups.py)
    r = _plan_cli("--model", "llama-3.1-8b", "--instance", "trn1.32xlarge", "--tp", "8", "--fsdp", "3")
    assert r.returncode == 1 and "TP=8 x FSDP=3 (24 cores)" in r.stderr, r.stderr
    assert "Unsupported topology" in r.stderr and "1, 2, 8, 16 or a multiple of 32" in r.stderr, r.stderr
    r = _plan_cli("--model", "llama-3.1-8b", "--instance", "trn1.32xlarge", "--nodes", "2", "--tp", "8",
                  "--fsdp", "4")
    assert r.returncode == 1 and "a job on 2 instances of 32 cores runs 64" in r.stderr, r.stderr


def test_plan_layout_that_does_not_fit_names_the_best_that_does(tmp_path):
    cfg = _config(tmp_path, WIDE)
    r = _plan_cli("--model", cfg, "--instance", "trn1.2xlarge", "--tp", "1", "--fsdp", "1", "--seq", "64", "--json")
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-3000:]
    p = json.loads(r.stdout)
    assert not p["fits"] and p["margin_bytes"] < 0
    assert p["by_category"]["parameters"] > 4.8e9                     # 2.46 B bf16 parameters on one core
    best = p["best_fitting_layout"]
    assert best["fits"] and (best["tp"], best["fsdp"]) == (2, 1), best
    assert "does not fit trn1.2xlarge" in r.stderr and "Best layout that fits: TP=2 x FSDP=1" in r.stderr, r.stderr


def test_plan_sweep_ranks_fitting_layouts_first(tmp_path):
    cfg = _config(tmp_path, WIDE)
    r = _plan_cli("--model", cfg, "--instance", "trn1.2xlarge", "--seq", "64", "--sweep", "--json")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    s = json.loads(r.stdout)
    layouts = [(p["tp"], p["fsdp"]) for p in s["plans"]]
    assert sorted(layouts) == [(1, 2), (2, 1)], layouts
    assert layouts[0] == (2, 1) and s["best"] == "TP=2 x FSDP=1"
    assert [p["fits"] for p in s["plans"]] == [True, False]
    # tables too: a terminal run prints the ranked layouts
    r = _plan_cli("--model", cfg, "--instance", "trn1.2xlarge", "--seq", "64", "--sweep")
    assert r.returncode == 0 and "TP=2 x FSDP=1" in r.stdout and "ranked" in r.stdout, r.stdout
    assert "x AWS's measured figures" in r.stdout, r.stdout   # the error band, from AWS's published runs


def test_sweep_order_rule():
    """Fitting layouts first, highest estimated tokens/s first; then the others, closest to fitting first."""
    from torch_neuronx.plan.planner import _rank

    class E:
        def __init__(self, s):
            self.tokens_per_second = 1 / s

    class P:
        def __init__(self, name, fits, margin, s):
            self.name, self.fits, self.margin_bytes, self.estimate = name, fits, margin, E(s)

    plans = [P("slow-fit", True, 5, 2.0), P("miss-far", False, -9, 0.1), P("fast-fit", True, 1, 1.0),
             P("miss-near", False, -1, 0.5)]
    assert [p.name for p in sorted(plans, key=_rank)] == ["fast-fit", "slow-fit", "miss-near", "miss-far"]


@pytest.mark.parametrize("dtype,checkpointing", [("bf16", "none"), ("fp32", "full"), ("bf16", "selective")])
def test_planned_peak_matches_the_emulator_one_process(tmp_path, dtype, checkpointing):
    """The planned per-core peak of a tiny Llama's step against the same step run for real on the emulator."""
    cfg = _config(tmp_path, TINY)
    r = run_python(f"""
import torch
from torch_neuronx.plan.config import load_config
from torch_neuronx.plan.measure import measure_step
from torch_neuronx.plan.step import StepSpec
from torch_neuronx.plan.trace import trace_step
config, _ = load_config({cfg!r})
spec = StepSpec(seq=128, batch=2, dtype={dtype!r}, activation_checkpointing={checkpointing!r})
planned = trace_step(config, spec).peak_bytes
real = measure_step(config, spec, torch.device("neuron", 0))
print("RATIO", planned, real["peak_bytes"], planned / real["peak_bytes"])
""")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    planned, measured, ratio = r.stdout.split("RATIO")[1].split()
    assert 0.95 <= float(ratio) <= 1.05, (planned, measured)


@pytest.mark.slow
def test_planned_peak_matches_the_emulator_two_ranks():
    """FSDP=2 and TP=2 under torchrun (bench/plan_accuracy.py's cases with two ranks)."""
    r = subprocess.run([sys.executable, "bench/plan_accuracy.py", "--models", "tiny-llama", "--max-world", "2",
                        "--seq", "128"], capture_output=True, text=True, cwd=ROOT, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "3 cases" in r.stdout and "all within 0.95-1.05" in r.stdout, r.stdout


def test_tied_embeddings_under_tp_and_fsdp():
    """tie_word_embeddings (Qwen2.5 0.5-3B, Llama-3.2 1B/3B...) with TP=2 x FSDP=2: the model is built untied,
    sharded and then tied, as from_pretrained does (tying first made Transformers' TP plan fail with
    KeyError: 'lm_head.weight'); the tied matrix is counted once."""
    r = run_python(f"""
from transformers import AutoConfig
from torch_neuronx.plan.step import StepSpec
from torch_neuronx.plan.trace import trace_step
spec = StepSpec(tp=2, fsdp=2, seq=64, batch=2)
tied = trace_step(AutoConfig.for_model(**{dict(TINY, tie_word_embeddings=True)!r}), spec)
untied = trace_step(AutoConfig.for_model(**{TINY!r}), spec)
assert untied.parameters - tied.parameters == 512 * 64, (tied.parameters, untied.parameters)
assert tied.by_category["parameters"] < untied.by_category["parameters"], (tied.by_category, untied.by_category)
print("OK")
""")
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]


def test_extrapolated_trace_equals_the_full_trace():
    """A deep model is traced with 2 and 3 decoder layers and extrapolated: on a 6-layer model (TP=2 x FSDP=2 in
    the simulated world) the result equals tracing all 6, category by category, and so do FLOPs and parameters."""
    r = run_python(f"""
from transformers import AutoConfig
from torch_neuronx.plan.step import StepSpec
from torch_neuronx.plan.trace import trace_step
cfg = AutoConfig.for_model(**{dict(TINY, num_hidden_layers=6)!r})
spec = StepSpec(tp=2, fsdp=2, seq=64, batch=2)
full, fast = trace_step(cfg, spec, full=True), trace_step(cfg, spec)
assert fast.notes and not full.notes
assert fast.by_category == full.by_category, (fast.by_category, full.by_category)
assert fast.parameters == full.parameters and abs(fast.cost.flops - full.cost.flops) <= 1e-6 * full.cost.flops
print("OK")
""")
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]
