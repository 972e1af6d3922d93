"""How close `torchneuron plan` is to the emulator's exact per-core accounting: for each model and layout, the
planned peak HBM of a steady-state training step (fake tensors, one process) against the same step run for real
under torchrun (torch_neuronx/plan/step.py for both; measured peak = torch.neuron.max_memory_allocated, the
largest over the ranks). Prints planned / measured per case; every ratio should lie within 0.95-1.05.

    .venv/bin/python bench/plan_accuracy.py                 # every model x layout (1, 2, 4 and 8 ranks)
    .venv/bin/python bench/plan_accuracy.py --models tiny-llama --max-world 2
    .venv/bin/python bench/plan_accuracy.py --scale         # Llama-3.1-70B TP8 x FSDP8 on trn2.48xlarge: time, RSS
    .venv/bin/python bench/plan_accuracy.py --published     # estimated / published tokens/s on AWS's trn1 runs

--published plans every configuration of AWS's published trn1 training figures (torch_neuronx/plan/published.py:
the shared table, then the held-out figures, then the rows a TP x FSDP layout cannot express) and prints estimated /
published tokens/s per row, next to the ratio the plan's error band was last derived from.

Run it under `flock /tmp/torchneuron-heavy.lock` on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

# Models that fit here: tiny, and ~50-150M parameters, Llama / Qwen2 / Mixtral-style (the published layer types).
MODELS = {
    "tiny-llama": dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=8, num_key_value_heads=4, vocab_size=512, tie_word_embeddings=False),
    "llama-100m": dict(model_type="llama", hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
                       num_attention_heads=12, num_key_value_heads=4, vocab_size=32000, tie_word_embeddings=False),
    # tied input/output embeddings, as the small Qwen2.5 checkpoints (0.5B-3B)
    "qwen2-60m": dict(model_type="qwen2", hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
                      num_attention_heads=8, num_key_value_heads=4, vocab_size=32000, tie_word_embeddings=True),
    "mixtral-70m": dict(model_type="mixtral", hidden_size=384, intermediate_size=768, num_hidden_layers=4,
                        num_attention_heads=8, num_key_value_heads=4, num_local_experts=8, num_experts_per_tok=2,
                        vocab_size=32000, tie_word_embeddings=False),
}
# (tp, fsdp): 1, 2, 4 and 8 ranks, with and without tensor parallelism
LAYOUTS = [(1, 1), (1, 2), (2, 1), (2, 2), (4, 1), (1, 4), (2, 4), (4, 2), (1, 8)]


def _write_config(name: str, folder: str) -> str:
    path = os.path.join(folder, f"{name}.json")
    with open(path, "w") as f:
        json.dump(dict(MODELS[name], max_position_embeddings=4096, rms_norm_eps=1e-5), f)
    return path


def worker(args) -> None:
    """One rank of the real run (under torchrun)."""
    import torch
    import torch.distributed as dist

    from torch_neuronx.plan.config import load_config
    from torch_neuronx.plan.measure import measure_step
    from torch_neuronx.plan.step import StepSpec

    spec = StepSpec(**json.loads(args.spec))
    rank, local = int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("neuron", local)
    torch.neuron.set_device(device)
    if spec.world > 1:
        dist.init_process_group("neuron", device_id=None)
    config, _ = load_config(args.config)
    result = measure_step(config, spec, device)
    peaks = [result["peak_bytes"]]
    if spec.world > 1:
        gathered = [None] * spec.world
        dist.all_gather_object(gathered, result["peak_bytes"])
        peaks = gathered
        dist.destroy_process_group()
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(dict(result, rank_peaks=peaks), f)


def measure(config_path: str, spec, timeout: float) -> dict:
    out = tempfile.mktemp(suffix=".json")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={spec.world}",
           os.path.abspath(__file__), "--worker", "--config", config_path, "--spec",
           json.dumps(spec.__dict__), "--out", out]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"real run failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-6000:]}")
    with open(out) as f:
        return json.load(f)


def accuracy(args) -> int:
    from torch_neuronx.plan.config import load_config
    from torch_neuronx.plan.step import StepSpec
    from torch_neuronx.plan.trace import trace_step

    import datetime

    import torch
    import transformers

    folder = tempfile.mkdtemp(prefix="plan-accuracy-")
    rows, worst = [], 0.0
    print(f"{datetime.date.today()}: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"seq {args.seq}, micro-batch {args.batch}, bf16, AdamW; measured = largest rank peak")
    print(f"{'model':<13} {'layout':<12} {'planned MiB':>12} {'measured MiB':>13} {'ratio':>7}  trace s  real s")
    for name in args.models:
        path = _write_config(name, folder)
        config, _ = load_config(path)
        for tp, fsdp in LAYOUTS:
            if tp * fsdp > args.max_world or config.num_attention_heads % tp or config.num_key_value_heads % tp:
                continue
            spec = StepSpec(tp=tp, fsdp=fsdp, seq=args.seq, batch=args.batch)
            t0 = time.perf_counter()
            planned = trace_step(config, spec).peak_bytes
            t1 = time.perf_counter()
            real = measure(path, spec, args.timeout)
            t2 = time.perf_counter()
            measured = max(real["rank_peaks"])
            ratio = planned / measured
            worst = max(worst, abs(ratio - 1))
            rows.append(dict(model=name, tp=tp, fsdp=fsdp, planned=planned, measured=measured, ratio=ratio,
                             rank_peaks=real["rank_peaks"]))
            print(f"{name:<13} {f'TP{tp} x FSDP{fsdp}':<12} {planned / 2**20:>12.2f} {measured / 2**20:>13.2f} "
                  f"{ratio:>7.3f}  {t1 - t0:7.1f} {t2 - t1:7.1f}", flush=True)
    ok = worst <= 0.05
    print(f"{len(rows)} cases; worst |ratio - 1| = {worst:.3f}: {'all within 0.95-1.05' if ok else 'OUT OF RANGE'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0 if ok else 1


def _timed_plan(cmd: list[str], what: str) -> None:
    """Run one `torchneuron plan ... --json` in a fresh process; print its wall time, peak host RSS and answer."""
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    p = json.loads(r.stdout)
    print(f"plan {what}: {wall:.1f} s wall, peak host RSS so far {rss / 2**30:.2f} GiB, exit {r.returncode}, per core "
          f"{p['peak_per_core'] / 2**30:.2f} GiB of {p['hbm_per_core'] / 2**30:.0f}, fits {p['fits']}, est. "
          f"{p['estimate']['tokens_per_second']:,.0f} tokens/s", flush=True)


def scale(args) -> int:
    """Llama-3.1-70B, TP=8 x FSDP=8 on trn2.48xlarge, seq 4096: wall time and peak host RSS of one plan; a job as
    large as AWS's published ones (Llama-2-7B on 32 trn1.32xlarge, 1,024 ranks simulated); then the 70B sweep over
    every valid layout (each in a fresh process)."""
    plan = [sys.executable, "-m", "torch_neuronx.cli", "plan"]
    _timed_plan(plan + ["--model", "llama-2-7b", "--instance", "trn1.32xlarge", "--nodes", "32", "--tp", "8", "--seq",
                        "4096", "--global-batch", "1024", "--activation-checkpointing", "selective", "--json"],
                "llama-2-7b 32 x trn1.32xlarge TP8 x FSDP128 seq 4096 selective")
    cmd = plan + ["--model", "llama-3.1-70b", "--instance", "trn2.48xlarge", "--tp", "8", "--fsdp", "8", "--seq",
                  "4096", "--json"]
    for extra in ([], ["--activation-checkpointing"]):
        _timed_plan(cmd + extra, f"llama-3.1-70b TP8 x FSDP8 seq 4096 {' '.join(extra) or '(no AC)'}")
    t = time.perf_counter()
    r = subprocess.run(cmd[:-5] + ["--seq", "4096", "--sweep", "--activation-checkpointing", "--json"],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    s = json.loads(r.stdout)
    print(f"sweep llama-3.1-70b trn2.48xlarge seq 4096 AC: {len(s['plans'])} layouts in {wall:.1f} s, best "
          f"{s['best']}, peak host RSS {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20:.2f} GiB")
    for p in s["plans"]:
        print(f"  {p['layout']:<16} {p['peak_per_core'] / 2**30:6.2f} GiB fits={p['fits']} "
              f"est {p['estimate']['step_seconds']:.2f} s/step {p['estimate']['tokens_per_second']:,.0f} tok/s")
    return 0


def published_accuracy(args) -> int:
    """Estimated / published tokens/s for every expressible row of AWS's published trn1 figures."""
    import datetime

    import torch
    import transformers

    from torch_neuronx.plan import planner, published

    folder = tempfile.mkdtemp(prefix="plan-published-")
    print(f"{datetime.date.today()}: torch {torch.__version__}, transformers {transformers.__version__}; "
          f"estimate vs AWS's published trn1.32xlarge training throughput (tokens/s for the job)")
    print(f"{'row':<20} {'layout':<22} {'seq':>5} {'GBS':>5} {'AC':<9} {'estimated':>10} {'published':>10} "
          f"{'ratio':>6} {'recorded':>8} {'MFU':>4}  wall s")
    worst, rows = 0.0, []
    for title, table in (("shared table", published.TABLE), ("held out", published.HELD_OUT)):
        print(f"-- {title}")
        for row in table:
            if args.rows and row.id not in args.rows:
                continue
            t0 = time.perf_counter()
            p = planner.plan(published.model_argument(row, folder), instance=row.instance, tp=row.tp, fsdp=row.dp,
                             seq=row.seq, batch=1, nodes=row.nodes, global_batch=row.global_batch,
                             activation_checkpointing=row.checkpointing, attention=row.attention)
            wall = time.perf_counter() - t0
            est = p.estimate.tokens_per_second
            ratio = est / row.tokens_per_second
            recorded = published.RATIOS.get(row.id)
            if title == "shared table":
                worst = max(worst, abs(ratio - 1))
            rows.append(dict(id=row.id, held_out=title != "shared table", estimated=est,
                             published=row.tokens_per_second, ratio=ratio, mfu=p.estimate.mfu,
                             breakdown=p.estimate.breakdown, micro_batch_seconds=p.estimate.micro_batch_seconds))
            layout = f"{row.nodes}n TP{row.tp} x FSDP{row.dp}"
            print(f"{row.id:<20} {layout:<22} {row.seq:>5} {row.global_batch:>5} {row.checkpointing:<9} "
                  f"{est:>10,.0f} {row.tokens_per_second:>10,.0f} {ratio:>6.3f} "
                  f"{'-' if recorded is None else f'{recorded:.3f}':>8} {p.estimate.mfu:>4.0%}  {wall:6.1f}",
                  flush=True)
    print("-- not expressible as TP x FSDP (pipeline parallelism; torchneuron plan has no --pp yet)")
    for row in published.NOT_EXPRESSIBLE:
        print(f"{row.id:<20} {f'{row.nodes}n TP{row.tp} x PP{row.pp} x DP{row.dp}':<22} {row.seq:>5} "
              f"{row.global_batch:>5} {row.checkpointing:<9} {'':>10} {row.tokens_per_second:>10,.0f}")
    print(f"shared table: worst |ratio - 1| = {worst:.3f}: "
          f"{'all within 0.75-1.25' if worst <= 0.25 else 'OUT OF 0.75-1.25'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0 if worst <= 0.25 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--max-world", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--scale", action="store_true", help="the 70B time / RSS check instead of the accuracy table")
    ap.add_argument("--published", action="store_true",
                    help="estimated / published tokens/s on AWS's published trn1 training figures")
    ap.add_argument("--rows", nargs="+", help="with --published: only these row ids")
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return 0
    # The real runs are one emulated host of their own: other emulator processes on this machine (other jobs,
    # other checkouts) hold NeuronCores in the shared core registry, and a held core would fail a rank.
    os.environ.setdefault("TORCHNEURON_CORE_REGISTRY", tempfile.mkdtemp(prefix="plan-accuracy-cores-"))
    os.environ.setdefault("TORCHNEURON_INSTANCE", "trn2.48xlarge")  # up to 8 ranks: not a small host's 4-core default
    if args.published:
        return published_accuracy(args)
    return scale(args) if args.scale else accuracy(args)


if __name__ == "__main__":
    sys.exit(main())
