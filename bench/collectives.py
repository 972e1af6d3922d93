"""Bus bandwidth of the neuron c10d backend against gloo on CPU tensors, measured in the same run.

    python bench/collectives.py                      # 2, 4, 8 ranks; 1, 4, 16, 64 MiB; checks off and on
    python bench/collectives.py --ranks 2 --sizes 1 16 --checks on

Every rank is a process on this host (rendezvous on 127.0.0.1). For each size
the same collective runs on neuron tensors over the "neuron" group and on CPU
tensors over a gloo group, in alternating blocks so that both see the same
machine load; each block repeats the collective enough times to last ~50 ms
and the best block of each kind counts (the machine is shared: the best block
is the one least disturbed). Bus bandwidth as in nccl-tests: size is the
all_reduce buffer and the all_gather output; busbw = size / time * 2(n-1)/n
for all_reduce and (n-1)/n for all_gather.

The neuron backend runs gloo's algorithms on zero-copy host aliases of device
memory, so with TORCHNEURON_COLLECTIVE_CHECKS=0 (data path only) the ratio
neuron/gloo should be ~1 (target >= 0.9). With the checks on (the default)
each collective first all-gathers a small signature: a fixed latency per
collective, visible at small sizes, negligible at large ones. Both are run
unless --checks says otherwise.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

MiB = 1 << 20
BLOCK_SECONDS = 0.05


def _collectives(op: str, numel: int, world: int, dev, gloo):
    """{kind: zero-argument callable} for neuron and gloo, and the nccl-tests bus bandwidth factor."""
    if op == "all_reduce":
        bufs = {"neuron": torch.ones(numel, device=dev), "gloo": torch.ones(numel)}
        return ({"neuron": lambda: dist.all_reduce(bufs["neuron"]),
                 "gloo": lambda: dist.all_reduce(bufs["gloo"], group=gloo)}, 2 * (world - 1) / world)
    part = numel // world
    out = {"neuron": torch.empty(part * world, device=dev), "gloo": torch.empty(part * world)}
    inp = {"neuron": torch.ones(part, device=dev), "gloo": torch.ones(part)}
    return ({"neuron": lambda: dist.all_gather_into_tensor(out["neuron"], inp["neuron"]),
             "gloo": lambda: dist.all_gather_into_tensor(out["gloo"], inp["gloo"], group=gloo)}, (world - 1) / world)


def _slowest_rank(seconds: float, gloo) -> float:
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
    return t.item()


def _bench_rank(rank: int, world: int, port: int, sizes_mib: list[int], rounds: int, queue) -> None:
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning)  # all_gather_into_tensor's rename in 2.13
    torch.set_num_threads(1)
    torch.neuron.set_device(rank)
    dev = torch.device("neuron", rank)
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    rows = []
    for op in ("all_reduce", "all_gather_into_tensor"):
        for mib in sizes_mib:
            run, factor = _collectives(op, mib * MiB // 4, world, dev, gloo)
            for fn in list(run.values()) * 2:  # warm up both paths
                fn()
            dist.barrier(group=gloo)
            t0 = time.perf_counter()
            run["gloo"]()
            reps = max(1, min(20, math.ceil(BLOCK_SECONDS / _slowest_rank(time.perf_counter() - t0, gloo))))
            best = {"neuron": math.inf, "gloo": math.inf}
            for r in range(rounds):
                for kind in (("neuron", "gloo") if r % 2 else ("gloo", "neuron")):
                    dist.barrier(group=gloo)
                    t0 = time.perf_counter()
                    for _ in range(reps):
                        run[kind]()
                    best[kind] = min(best[kind], _slowest_rank((time.perf_counter() - t0) / reps, gloo))
            busbw = {k: mib * MiB / t * factor / 1e9 for k, t in best.items()}
            rows.append((world, op, mib, busbw["neuron"], busbw["gloo"], busbw["neuron"] / busbw["gloo"]))
            del run
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sweep(ranks: list[int], sizes: list[int], rounds: int, checks: bool) -> float:
    os.environ["TORCHNEURON_COLLECTIVE_CHECKS"] = "1" if checks else "0"  # read by the spawned ranks
    print(f"\ncollective checks {'on (default)' if checks else 'off (data path only)'}")
    print(f"{'ranks':>5} {'collective':<24} {'size':>7} {'neuron GB/s':>12} {'gloo GB/s':>10} {'ratio':>6}")
    ctx = mp.get_context("spawn")
    worst = math.inf
    for world in ranks:
        queue = ctx.SimpleQueue()
        mp.start_processes(_bench_rank, args=(world, _free_port(), sizes, rounds, queue), nprocs=world,
                           start_method="spawn")
        for w, op, mib, neuron, gloo, ratio in queue.get():
            worst = min(worst, ratio)
            print(f"{w:>5} {op:<24} {mib:>4} MiB {neuron:>12.3f} {gloo:>10.3f} {ratio:>6.2f}", flush=True)
    print(f"lowest ratio: {worst:.2f} (target >= 0.9)")
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64], help="MiB")
    parser.add_argument("--rounds", type=int, default=5, help="blocks of each kind; the best counts")
    parser.add_argument("--checks", choices=["off", "on", "both"], default="both")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"neuron c10d backend vs gloo on CPU tensors; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; best of {args.rounds} blocks")
    for checks in {"off": [False], "on": [True], "both": [False, True]}[args.checks]:
        _sweep(args.ranks, args.sizes, args.rounds, checks)


if __name__ == "__main__":
    main()
