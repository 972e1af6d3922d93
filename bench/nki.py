"""NKI kernels on the emulated NeuronCore against PyTorch on CPU, measured in one run.

Prints, for the flash-attention forward kernel of examples/nki_flash_attention.py (seq 2048, head dim 128, one
head, fp32) on `neuron` tensors against torch's scaled_dot_product_attention on CPU tensors of the same shapes:

  flash fwd            kernel time / CPU SDPA time, best of --repeats interleaved runs     target <= 20
  flash fwd (causal)   the same with the causal mask                                       (no target)

The emulator executes whole tiles per instruction (a [128, 512] matmul is one torch matmul), so the ratio is
the cost of interpreting ~1,400 instructions around the same arithmetic SDPA does. Also printed: the
instructions per engine and the estimated NeuronCore time of one call (an estimate from the documented
engine rates, torch_neuronx.nki.statistics(); nothing here runs on a NeuronCore). Both sides use --threads
intra-op threads (default 1: on a small shared machine OpenMP barriers stall under load, bench/eager.py).

    python bench/nki.py [--repeats 5] [--threads 1] [--seq 2048]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TORCHNEURON_CORE_REGISTRY", tempfile.mkdtemp(prefix="torchneuron-bench-cores-"))
HERE = os.path.dirname(os.path.abspath(__file__))
# this file is bench/nki.py: its directory on sys.path would make `import nki` import this script
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import nki_flash_attention as fa  # noqa: E402
import torch_neuronx.nki as tnki  # noqa: E402


def best_times(repeats: int, fns: dict) -> dict:
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return {k: min(v) for k, v in times.items()}


def flash_ratio(seq: int, repeats: int, causal: bool) -> tuple[float, dict]:
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 1, seq, 128) for _ in range(3))
    qd, kd, vd = (t.to("neuron") for t in (q, k, v))
    scale = 128 ** -0.5
    out, _ = fa.flash_attention(qd, kd, vd, scale, causal)   # the plan (dry run) and a first real run
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    err = (out.cpu() - ref).abs().max().item()
    assert err < 1e-4, f"flash attention differs from SDPA by {err}"
    tnki.reset_statistics()
    t = best_times(repeats, {
        "cpu": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale),
        "neuron": lambda: fa.flash_attention(qd, kd, vd, scale, causal)[0].cpu(),
    })
    stats = tnki.statistics()["flash_attention_fwd"]
    return t["neuron"] / t["cpu"], {"times": t, "stats": stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seq", type=int, default=2048)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for causal, target in ((False, 20.0), (True, None)):
        ratio, info = flash_ratio(args.seq, args.repeats, causal)
        t, stats = info["times"], info["stats"]
        name = "flash fwd" + (" (causal)" if causal else "")
        verdict = "" if target is None else ("  OK" if ratio <= target else f"  ABOVE TARGET {target}")
        print(f"{name:20s} neuron {t['neuron'] * 1e3:8.1f} ms  cpu sdpa {t['cpu'] * 1e3:7.1f} ms  "
              f"ratio {ratio:5.2f}{'  (target <= %g)' % target if target else ''}{verdict}")
        last = stats.last
        inst = ", ".join(f"{e} {n}" for e, n in last.instructions.items() if n)
        print(f"{'':20s} one call on {stats.generation}: {inst}; estimated {last.estimated_s * 1e6:.1f} us "
              f"(estimate from documented engine rates)")


if __name__ == "__main__":
    main()
