"""torchneuron plan's step-time model (torch_neuronx/plan/: flash_attention.py, interconnect.py, fusion.py,
estimate.py, published.py): each mechanism on a stream built by hand with the numbers worked out here, then the
traced model at the scale AWS publishes (a 16-instance job, gradient accumulation, selective checkpointing) and the
attention memory plan at a long sequence."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT, run_python

TINY = dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=8,
            num_key_value_heads=8, vocab_size=512, max_position_embeddings=16384, tie_word_embeddings=False)


def _plan_cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "torch_neuronx.cli", "plan", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"))


def _config(tmp_path, cfg):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


# ---- the mechanisms, by hand ------------------------------------------------------------------------------------

def test_flash_attention_work():
    """Causal flash attention computes the tiles on and below the diagonal; backward is 2.5x the forward's FLOPs."""
    from torch_neuronx.plan.flash_attention import Call
    fwd = Call(backward=False, batch=1, heads=4, q_len=4096, k_len=4096, head_dim=128, causal=True, masked=False)
    n = 4096 // 128
    assert fwd.computed_fraction == (n + 1) / (2 * n)
    assert fwd.flops == 4 * 4 * 4096 * 4096 * 128 * (n + 1) / (2 * n)
    bwd = Call(True, 1, 4, 4096, 4096, 128, True, False)
    assert bwd.flops == 2.5 * fwd.flops and bwd.vector_passes > fwd.vector_passes
    full = Call(False, 1, 4, 4096, 4096, 128, False, True)
    assert full.computed_fraction == 1.0 and full.vector_passes == fwd.vector_passes + 2   # the mask's extra pass


def test_collective_time_follows_the_links_the_group_spans():
    """AWS's hierarchical algorithm: an FSDP group of 4 ranks on each of 16 trn1.32xlarge moves (X-1)/X of its 1/Y
    over EFA at its instance's 800 Gbps over 32 ranks; a TP group of 8 cores on 4 chips takes (C-1)/C of the payload
    into each chip over NeuronLink (384 GB/s); two cores of one chip exchange at the core's DMA rate."""
    from torch_neuronx.plan import hardware, interconnect
    from torch_neuronx.plan.cost import Collective
    m = hardware.machine("trn1.32xlarge", nodes=16)
    payload = 1 << 30
    fsdp = Collective("all_gather", 64, tuple(range(0, 512, 8)), payload)
    assert interconnect.link_of(fsdp, m) == "EFA"
    inter = 15 / 16 * payload / 4 / (800e9 / 8 / 32) + 4 * hardware.HOP_LATENCY_INTER
    intra = 3 / 4 * payload / (384e9 / 2) + 3 * hardware.HOP_LATENCY_INTRA   # two FSDP groups share each chip
    assert interconnect.seconds(fsdp, m) == pytest.approx(inter + intra)
    tp = Collective("all_reduce", 8, tuple(range(8)), payload)
    assert interconnect.link_of(tp, m) == "NeuronLink"
    assert interconnect.seconds(tp, m) == pytest.approx(2 * (3 / 4 * payload / 384e9 + 3 * hardware.HOP_LATENCY_INTRA))
    pair = Collective("reduce_scatter", 2, (0, 1), payload)
    assert interconnect.link_of(pair, m) == "on-chip"
    assert interconnect.seconds(pair, m) == pytest.approx(payload / 2 / m.dma_bytes_per_s + hardware.HOP_LATENCY_INTRA)


def _op(name, kind, reads, writes, **kw):
    from torch_neuronx.plan.cost import Op
    return Op(name=name, kind=kind, phase=kw.pop("phase", "forward"), reads=tuple(reads), writes=tuple(writes), **kw)


def test_fusion_keeps_intermediates_on_chip():
    """matmul -> silu -> mul -> matmul: the element-wise pair is one region whose only HBM traffic is its outside
    input and its output; the first matmul's output goes straight from PSUM into the region (epilogue)."""
    from torch_neuronx.plan import fusion, hardware
    m = hardware.machine("trn1.32xlarge")
    mb = 8 << 20
    ops = [_op("mm", "matmul", [(1, mb), (2, mb)], [(3, mb)], flops=1e9, out_elements=mb // 2),
           _op("silu", "vector", [(3, mb)], [(4, mb)], scalar=mb // 2),
           _op("mul", "vector", [(4, mb), (5, mb)], [(6, mb)], vector=mb),
           _op("mm", "matmul", [(6, mb), (7, mb)], [(8, mb)], flops=1e9, out_elements=mb // 2)]
    items = fusion.schedule(ops, m)
    assert [i.what for i in items] == ["matmul", "region", "matmul"]
    first, region, _ = items
    assert first.hbm_bytes == 2 * mb                    # its output never reaches HBM
    assert region.hbm_bytes == 2 * mb                   # reads 5, writes 6; 3 from PSUM, 4 stays on chip
    assert region.scalar == pytest.approx(mb // 2 / m.scalar_rate(True))
    assert region.vector == pytest.approx(mb / m.vector_rate(True))
    assert region.seconds == max(region.vector, region.scalar, region.dma)
    later_use = ops + [_op("mul", "vector", [(3, mb), (9, mb)], [(10, mb)], vector=mb)]
    assert fusion.schedule(later_use, m)[0].hbm_bytes == 3 * mb   # used again later: written to HBM


def test_overlap_hides_fsdp_collectives_behind_compute():
    """FSDP2 collectives (non-blocking c10d) hide behind the phase's compute except the first all-gather; TP
    collectives (blocking, functional) add to the critical path."""
    from torch_neuronx.plan import hardware
    from torch_neuronx.plan.cost import Collective, StepCost
    from torch_neuronx.plan.estimate import estimate
    from torch_neuronx.plan.step import StepSpec
    m = hardware.machine("trn1.32xlarge", nodes=2)
    big = 256 << 20
    fsdp = Collective("all_gather", 8, tuple(range(0, 64, 8)), big, blocking=False)
    tp = Collective("all_reduce", 8, tuple(range(8)), big)
    mm = dict(flops=2e12, out_elements=1)
    ops = [_op("all_gather", "collective", [], [(1, big)], collective=fsdp),
           _op("mm", "matmul", [(1, 8)], [(2, 8)], **mm),
           _op("all_gather", "collective", [], [(3, big)], collective=fsdp),
           _op("all_reduce", "collective", [(2, 8)], [(4, 8)], collective=tp),
           _op("mm", "matmul", [(3, 8)], [(5, 8)], **mm)]
    e = estimate(StepCost(flops=4e12, forward_flops=4e12, streams=[(ops, 1.0)]), m, StepSpec(tp=8, fsdp=8))
    from torch_neuronx.plan import interconnect
    ag, ar = interconnect.seconds(fsdp, m), interconnect.seconds(tp, m)
    compute = e.breakdown["compute"]
    assert e.breakdown["fsdp_collectives"] == pytest.approx(2 * ag)
    assert e.breakdown["fsdp_exposed"] == pytest.approx(ag + max(0.0, ag - compute))
    assert e.micro_batch_seconds == pytest.approx(compute + ar + e.breakdown["fsdp_exposed"])
    assert e.tokens_per_step == 2048 * 8 and e.mfu == pytest.approx(3 * 4e12 / (e.step_seconds * 95e12))


def test_gradient_accumulation_multiplies_micro_batches_not_the_optimizer():
    from torch_neuronx.plan import hardware
    from torch_neuronx.plan.cost import StepCost
    from torch_neuronx.plan.estimate import estimate
    from torch_neuronx.plan.step import StepSpec
    m = hardware.machine("trn1.32xlarge")
    ops = [_op("mm", "matmul", [(1, 8)], [(2, 8)], flops=1e12, out_elements=1),
           _op("_foreach_mul_", "vector", [(3, 1 << 30)], [(3, 1 << 30)], either=1 << 28, phase="optimizer")]
    one = estimate(StepCost(streams=[(ops, 1.0)]), m, StepSpec(tp=8, fsdp=4))
    many = estimate(StepCost(streams=[(ops, 1.0)]), m, StepSpec(tp=8, fsdp=4, global_batch=64))
    assert many.accumulation == 16 and many.tokens_per_step == 16 * one.tokens_per_step
    assert many.step_seconds == pytest.approx(16 * one.micro_batch_seconds + one.optimizer_seconds)
    assert one.optimizer_seconds > 0


def test_published_band_is_the_recorded_range():
    from torch_neuronx.plan import published
    ids = [r.id for r in published.TABLE]
    assert all(r.expressible for r in published.TABLE + published.HELD_OUT)
    assert not any(r.expressible for r in published.NOT_EXPRESSIBLE)
    assert not set(ids) & {r.id for r in published.HELD_OUT}
    band, source = published.band()
    assert band == (min(published.RATIOS[i] for i in ids), max(published.RATIOS[i] for i in ids))
    assert "published trn1 runs" in source and "Trainium1" in published.band("Trainium2")[1]


# ---- the topology rule, as the runtime and the plan apply it ----------------------------------------------------

def test_collective_rule_constrains_the_world_not_its_groups():
    """AWS runs TP 8 x DP 4 on one trn1.32xlarge: DP groups of 4 cores in a 32-core world. The rule ("1, 2, 8, 16
    or a multiple of 32") counts the job's cores."""
    from torch_neuronx.runtime import CollectiveTopologyError, check_collective_group
    check_collective_group(4, [0, 8, 16, 24], "trn1.32xlarge")
    check_collective_group(32, None, "trn1.32xlarge")
    check_collective_group(512, None, "trn1.32xlarge")
    with pytest.raises(CollectiveTopologyError, match="a job of 24 ranks on trn1.32xlarge"):
        check_collective_group(24, None, "trn1.32xlarge")


def test_plan_accepts_the_layout_aws_publishes_on_one_trn1(tmp_path):
    cfg = _config(tmp_path, TINY)
    r = run_python(f"""
from torch_neuronx.plan import PlanError, plan
p = plan({cfg!r}, instance="trn1.32xlarge", tp=8, fsdp=4, seq=64)
assert (p.tp, p.fsdp, p.fits) == (8, 4, True), p.layout
for kwargs, message in [(dict(instance="trn1.32xlarge", tp=8, fsdp=3), "Unsupported topology: a job of 24 ranks"),
                        (dict(instance="inf2.48xlarge", nodes=2, tp=8), "runs no collectives across instances")]:
    try:
        plan({cfg!r}, seq=64, **kwargs)
        raise AssertionError(f"{{kwargs}} was accepted")
    except PlanError as e:
        assert message in str(e), e
print("OK")
""")
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]


# ---- traced: the job AWS runs, and the attention memory plan ----------------------------------------------------

def test_sixteen_instance_job_with_accumulation_and_selective_checkpointing(tmp_path):
    """TP 8 x FSDP 64 over 16 trn1.32xlarge, global batch 1024 (16 micro-batches per FSDP rank), selective
    checkpointing: FSDP's collectives cross EFA, TP's stay on NeuronLink, the step counts every micro-batch; a
    global batch the FSDP ranks cannot split is bad input."""
    cfg = _config(tmp_path, dict(TINY, num_hidden_layers=2))
    r = _plan_cli("--model", cfg, "--instance", "trn1.32xlarge", "--nodes", "16", "--tp", "8", "--seq", "256",
                  "--global-batch", "1024", "--activation-checkpointing", "selective", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    p = json.loads(r.stdout)
    e = p["estimate"]
    assert (p["nodes"], p["fsdp"], p["global_batch"], e["accumulation"]) == (16, 64, 1024, 16)
    assert e["tokens_per_step"] == 1024 * 256
    assert e["step_seconds"] == pytest.approx(16 * e["micro_batch_seconds"] + e["optimizer_seconds"])
    links = {(c["kind"], c["group"]): c for c in e["collectives"]}
    assert links[("all_gather", 64)]["link"] == "EFA" and links[("all_gather", 64)]["overlapped"]
    assert links[("all_reduce", 8)]["link"] == "NeuronLink" and not links[("all_reduce", 8)]["overlapped"]
    assert e["breakdown"]["tensor_engine"] > 0 and 0 < e["mfu"] < 1
    assert e["hbm_bytes"] < e["hbm_bytes_unfused"]
    from torch_neuronx.plan import published
    assert e["band"] == list(published.band()[0]) and "published trn1 runs" in e["band_source"]
    r = _plan_cli("--model", cfg, "--instance", "trn1.32xlarge", "--nodes", "16", "--tp", "8", "--seq", "256",
                  "--global-batch", "1000")
    assert r.returncode == 1 and "not a multiple of micro-batch 1 x FSDP 64" in r.stderr, r.stderr[-2000:]


def test_long_sequence_plan_has_no_score_matrix(tmp_path):
    """At seq 8192 one head's score matrix alone is 128 MiB (bf16). The planned step (SDPA: the flash kernel)
    holds nothing of that size: its peak stays below one head's scores; Transformers' eager attention, which
    does materialise them, plans above eight heads' worth."""
    cfg = _config(tmp_path, TINY)
    r = run_python(f"""
from torch_neuronx.plan import plan
seq = 8192
one_head_scores = seq * seq * 2
tensors = {{}}
for attention in ("sdpa", "eager"):
    p = plan({cfg!r}, instance="trn2.48xlarge", tp=1, fsdp=1, seq=seq, attention=attention)
    tensors[attention] = p.peak_per_core - p.by_category["runtime_reserve"]
assert tensors["sdpa"] < one_head_scores, tensors
assert tensors["eager"] > 8 * one_head_scores, tensors
print("OK", tensors)
""")
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]
