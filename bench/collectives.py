"""The neuron c10d backend against gloo on CPU tensors, measured in the same run; and training.

    python bench/collectives.py                          # 2, 4, 8 ranks; 1, 4, 16, 64 MiB; checks on (default)
    python bench/collectives.py --ranks 2 --sizes 1 16 --checks both --seconds 8
    python bench/collectives.py --train 8                # examples/train_tp_fsdp.py on 8 ranks, shared memory vs gloo
    python bench/collectives.py --ops send_recv --ranks 2 4   # point-to-point: every rank to the next, around the ring

Every rank is a process on this host (rendezvous on 127.0.0.1), so the
"neuron" group moves data through shared memory (SharedMemoryCollectives),
as the cores of one instance over NeuronLink. For each collective and size,
calls of the same collective on neuron tensors over the "neuron" group and on
CPU tensors over a gloo group alternate one by one (gloo first in even pairs,
neuron first in odd ones), so that both see the same machine load even when it
changes within milliseconds (the machine may be shared). Each call counts as
long as its slowest rank took. The table shows the median busbw of each kind
and the median of the per-pair ratios gloo time / neuron time. Bus bandwidth
as in nccl-tests: size is the all_reduce buffer, the all_gather output and the
reduce_scatter input; busbw = size / time * 2(n-1)/n for all_reduce and
(n-1)/n for the others. send_recv (--ops): every rank sends `size` to the next rank and receives as much
from the previous one (batch_isend_irecv, what pipeline stages do); its busbw is size / time.

Also measured in the same run: the bandwidth of one thread copying 64 MiB
(torch's copy_, i.e. memcpy: the limit a copy-based transport approaches; the
2-rank 64 MiB busbw is printed as a share of it), and the latency of a 1 KiB
all_reduce and of a barrier (median per call, gloo / neuron). For these, each
timed call follows an untimed call of the same kind: a call lasts until its
last rank arrives, so a timed call right after the other kind would count that
kind's spread of exit times (tens to hundreds of microseconds with more ranks
than CPUs, as long as a whole barrier) as its own latency; primed, each kind
pays its own spread, as in a loop of calls of one kind (as nccl-tests and the
OSU benchmarks time latency). Busbw calls take milliseconds and are not primed.

Targets (issue 11): ratio >= 3 at 4-64 MiB for 2, 4 and 8 ranks; >= 0.5 of the
copy bandwidth at 64 MiB, 2 ranks; small-collective latency <= 1/5 of gloo's;
training on 8 ranks >= 2x the tokens/s with the shared-memory path off
(TORCHNEURON_SHM_COLLECTIVES=0), with the same losses. `--checks off`
measures the data path without the pre-collective check
(TORCHNEURON_COLLECTIVE_CHECKS=0), `--checks network` with the check through
gloo that groups spanning hosts use.
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

MiB = 1 << 20
KINDS = ("neuron", "gloo")
MIN_PAIRS, MAX_PAIRS = 9, 400
CHECK_MODES = {"on": "1", "off": "0", "network": "network"}
OPS = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor")
POINT_TO_POINT = "send_recv"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _collectives(op: str, numel: int, world: int, dev, gloo):
    """{kind: zero-argument callable} for neuron and gloo, and the nccl-tests bus bandwidth factor."""
    if op == "all_reduce":
        bufs = {"neuron": torch.ones(numel, device=dev), "gloo": torch.ones(numel)}
        return ({"neuron": lambda: dist.all_reduce(bufs["neuron"]),
                 "gloo": lambda: dist.all_reduce(bufs["gloo"], group=gloo)}, 2 * (world - 1) / world)
    if op == "barrier":
        return {"neuron": lambda: dist.barrier(), "gloo": lambda: dist.barrier(group=gloo)}, 0.0
    if op == POINT_TO_POINT:
        rank = dist.get_rank()
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        out = {"neuron": torch.ones(numel, device=dev), "gloo": torch.ones(numel)}
        inp = {"neuron": torch.empty(numel, device=dev), "gloo": torch.empty(numel)}

        def exchange(kind, group=None):
            ops = [dist.P2POp(dist.isend, out[kind], nxt, group), dist.P2POp(dist.irecv, inp[kind], prv, group)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()

        return {"neuron": lambda: exchange("neuron"), "gloo": lambda: exchange("gloo", gloo)}, 1.0
    part = numel // world
    big = {"neuron": torch.ones(part * world, device=dev), "gloo": torch.ones(part * world)}
    small = {"neuron": torch.ones(part, device=dev), "gloo": torch.ones(part)}
    if op == "all_gather_into_tensor":
        return ({"neuron": lambda: dist.all_gather_into_tensor(big["neuron"], small["neuron"]),
                 "gloo": lambda: dist.all_gather_into_tensor(big["gloo"], small["gloo"], group=gloo)},
                (world - 1) / world)
    return ({"neuron": lambda: dist.reduce_scatter_tensor(small["neuron"], big["neuron"]),
             "gloo": lambda: dist.reduce_scatter_tensor(small["gloo"], big["gloo"], group=gloo)}, (world - 1) / world)


def _measure(run: dict, gloo, seconds: float, primed: bool = False) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Times of pairs of calls (one of each kind, alternating order), each as long as its slowest rank took.

    primed: each timed call follows an untimed call of its own kind (latency: see the module's doc)."""
    for fn in list(run.values()) * 2:  # warm up both paths
        fn()
    t0 = time.perf_counter()
    run["gloo"]()
    once = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(once, op=dist.ReduceOp.MAX, group=gloo)
    pairs = max(MIN_PAIRS, min(MAX_PAIRS, int(seconds / (4 if primed else 2) / once.item())))
    times = torch.empty(pairs, 2, dtype=torch.float64)
    for i in range(pairs):
        for kind in (("neuron", "gloo") if i % 2 else ("gloo", "neuron")):
            if primed:
                run[kind]()
            t0 = time.perf_counter()
            run[kind]()
            times[i, KINDS.index(kind)] = time.perf_counter() - t0
    dist.all_reduce(times, op=dist.ReduceOp.MAX, group=gloo)
    return times[:, 0], times[:, 1], pairs


def _bench_rank(rank: int, world: int, port: int, sizes_mib: list[int], seconds: float, queue, ops) -> None:
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning)  # all_gather_into_tensor's rename in 2.13
    torch.set_num_threads(1)
    torch.neuron.set_device(rank)
    dev = torch.device("neuron", rank)
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    if rank == 0:
        queue.put(("transport", dist.group.WORLD._get_backend(dev).data_transport))
    for op in ops:
        for mib in sizes_mib:
            run, factor = _collectives(op, mib * MiB // 4, world, dev, gloo)
            neuron, gloo_t, pairs = _measure(run, gloo, seconds)
            ratio = (gloo_t / neuron).median().item()
            busbw = {k: mib * MiB / t.median().item() * factor / 1e9 for k, t in (("neuron", neuron), ("gloo", gloo_t))}
            if rank == 0:
                queue.put(("busbw", world, op, mib, busbw["neuron"], busbw["gloo"], ratio, pairs))
            del run
    latency = ((POINT_TO_POINT, 256),) if POINT_TO_POINT in ops else ()
    if set(ops) - {POINT_TO_POINT}:
        latency = (("all_reduce", 256), ("barrier", 0)) + latency  # 1 KiB of float32
    for op, numel in latency:
        run, _ = _collectives(op, numel, world, dev, gloo)
        neuron, gloo_t, pairs = _measure(run, gloo, seconds / 2, primed=True)
        if rank == 0:
            queue.put(("latency", world, op, neuron.median().item() * 1e6, gloo_t.median().item() * 1e6,
                       (gloo_t / neuron).median().item(), pairs))
        del run
    if rank == 0:
        queue.put(None)
    dist.destroy_process_group()


def _copy_bandwidth(mib: int = 64, repeats: int = 15) -> float:
    """GB/s of one thread copying `mib` MiB (torch's copy_: memcpy), median of `repeats`."""
    torch.set_num_threads(1)
    src, dst = torch.ones(mib * MiB // 4), torch.empty(mib * MiB // 4)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    return mib * MiB / sorted(times)[len(times) // 2] / 1e9


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sweep(ranks: list[int], sizes: list[int], seconds: float, checks: str, copy_gbs: float, ops) -> None:
    os.environ["TORCHNEURON_COLLECTIVE_CHECKS"] = CHECK_MODES[checks]  # read by the spawned ranks
    label = {"on": "on (default: shared memory)", "off": "off (data path only)",
             "network": "through gloo (as groups spanning hosts)"}[checks]
    print(f"\ncollective checks {label}")
    ctx = mp.get_context("spawn")
    rows, latencies = [], []
    for world in ranks:
        queue = ctx.SimpleQueue()
        procs = mp.start_processes(_bench_rank, args=(world, _free_port(), sizes, seconds, queue, ops), nprocs=world,
                                   start_method="spawn", join=False)
        while (row := queue.get()) is not None:
            if row[0] == "transport":
                print(f"\n{world} ranks, neuron data through {row[1]}; load average {os.getloadavg()[0]:.1f}")
                print(f"{'ranks':>5} {'collective':<24} {'size':>7} {'neuron GB/s':>12} {'gloo GB/s':>10} "
                      f"{'ratio':>6} {'pairs':>6}")
            elif row[0] == "busbw":
                _, w, op, mib, neuron, gloo, ratio, pairs = row
                rows.append(row[1:])
                print(f"{w:>5} {op:<24} {mib:>4} MiB {neuron:>12.3f} {gloo:>10.3f} {ratio:>6.2f} {pairs:>6}", flush=True)
            else:
                _, w, op, neuron_us, gloo_us, ratio, pairs = row
                latencies.append(row[1:])
                size = "" if op == "barrier" else "1 KiB"
                print(f"{w:>5} {op + ' latency':<24} {size:>7} {neuron_us:>9.1f} us {gloo_us:>7.1f} us {ratio:>6.2f} "
                      f"{pairs:>6}", flush=True)
        while not procs.join():
            pass
    print(f"\nload average after: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[1]:.1f} (5 min)")
    big = [r for r in rows if 4 <= r[2] <= 64]
    if big:
        worst = min(big, key=lambda r: r[5])
        print(f"lowest busbw ratio at 4-64 MiB: {worst[5]:.2f} ({worst[0]} ranks, {worst[1]}, {worst[2]} MiB; "
              f"target >= 3)")
    for r in rows:
        if r[0] == 2 and r[2] == 64:
            print(f"2 ranks, {r[1]}, 64 MiB: {r[3]:.2f} GB/s = {r[3] / copy_gbs:.2f} of the copy bandwidth "
                  f"{copy_gbs:.2f} GB/s (target >= 0.5)")
    if latencies:
        worst = min(latencies, key=lambda r: r[4])
        print(f"lowest latency ratio gloo/neuron: {worst[4]:.1f} ({worst[0]} ranks, {worst[1]}; target >= 5)")


def _train(ranks: int) -> None:
    """examples/train_tp_fsdp.py under torchrun with the shared-memory path on, then off: tokens/s and losses."""
    import re
    import subprocess
    import sys
    results = {}
    for label, shm in (("shared memory", "1"), ("gloo", "0")):
        env = dict(os.environ, TORCHNEURON_SHM_COLLECTIVES=shm, OMP_NUM_THREADS="1")
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={ranks}", "--master-addr=127.0.0.1",
               f"--master-port={_free_port()}", os.path.join(ROOT, "examples", "train_tp_fsdp.py")]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
        if out.returncode != 0:
            # The ranks' own errors first: torchrun's summary at the end of stderr names no cause.
            causes = [line for line in out.stderr.splitlines() if re.match(r"\[rank\d+\]: \S*(Error|Exception)", line)]
            raise SystemExit(f"train_tp_fsdp.py ({label}) failed:\n" + "\n".join(causes[:8]) +
                             f"\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
        losses = re.findall(r"step \d+ loss (\S+)", out.stdout)
        tokens = float(re.search(r"(\d+) tokens/s", out.stdout).group(1))
        results[label] = (tokens, losses)
        print(f"{label:>14}: {tokens:8.0f} tokens/s, losses {' '.join(losses)}; load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    (shm_tokens, shm_losses), (gloo_tokens, gloo_losses) = results["shared memory"], results["gloo"]
    # Bit-identical losses cannot be expected: the shared-memory path reduces in rank order, gloo's ring
    # in an order that depends on the chunk (docs/distributed.md), so gradients differ in the last bits.
    worst = max((abs(float(a) - float(b)) / max(abs(float(b)), 1e-12) for a, b in zip(shm_losses, gloo_losses)),
                default=float("inf"))
    same = len(shm_losses) == len(gloo_losses) and worst <= 1e-3
    print(f"tokens/s shared memory / gloo: {shm_tokens / gloo_tokens:.2f} (target >= 2); losses "
          f"{'identical' if shm_losses == gloo_losses else 'equal' if same else 'DIFFER'}"
          f" (largest relative difference {worst:.1e}; limit 1e-3: reduction orders differ)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64], help="MiB")
    parser.add_argument("--seconds", type=float, default=6.0,
                        help="time per cell (both kinds), as pairs of calls: at least %d, at most %d pairs"
                        % (MIN_PAIRS, MAX_PAIRS))
    parser.add_argument("--checks", choices=["on", "off", "network", "both"], default="on",
                        help="the pre-collective check of the neuron backend; both: off, then on")
    parser.add_argument("--ops", nargs="+", choices=OPS + (POINT_TO_POINT,), default=list(OPS),
                        help="what to measure (default: the three collectives)")
    parser.add_argument("--train", type=int, metavar="RANKS",
                        help="instead: examples/train_tp_fsdp.py on RANKS ranks, shared memory vs gloo")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # The ranks hold cores of an emulated instance of their own (a private core registry): a core that
    # another job on this machine holds in the default registry would make a rank fail (a held core
    # is an error, as on Neuron), and did: the --train run of 2026-12-04 lost ranks 0 and 1 that way.
    registry = tempfile.TemporaryDirectory(prefix="torchneuron-bench-cores-")
    os.environ.setdefault("TORCHNEURON_CORE_REGISTRY", os.path.join(registry.name, "cores"))
    # Up to 8 ranks, one core each: the 64-core instance, whatever the host's default (trn2.3xlarge: 4 cores).
    os.environ.setdefault("TORCHNEURON_INSTANCE", "trn2.48xlarge")
    if args.train:
        print(f"examples/train_tp_fsdp.py on {args.train} ranks; {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f}")
        _train(args.train)
        return
    copy_gbs = _copy_bandwidth()
    print(f"neuron c10d backend vs gloo on CPU tensors; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; medians over pairs of calls (one of each kind, alternating order)")
    print(f"one thread copying 64 MiB: {copy_gbs:.2f} GB/s")
    for checks in (["off", "on"] if args.checks == "both" else [args.checks]):
        _sweep(args.ranks, args.sizes, args.seconds, checks, copy_gbs, args.ops)


if __name__ == "__main__":
    main()
