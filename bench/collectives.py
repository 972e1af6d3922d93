"""Bus bandwidth of the neuron c10d backend against gloo on CPU tensors, measured in the same run.

    python bench/collectives.py                          # 2, 4, 8 ranks; 1, 4, 16, 64 MiB; checks on (default)
    python bench/collectives.py --ranks 2 --sizes 1 16 --checks both --rounds 15

Every rank is a process on this host (rendezvous on 127.0.0.1). For each
collective and size, blocks of the same collective on neuron tensors over the
"neuron" group and on CPU tensors over a gloo group alternate (gloo first in
even rounds, neuron first in odd ones), so that both see the same machine load.
A block repeats the collective enough times to last ~50 ms and is timed on the
slowest rank. Each round gives a ratio gloo time / neuron time of its two
adjacent blocks; the table shows the median busbw of each kind and the median
of the per-round ratios (robust to the load of a shared machine drifting during
the run). Bus bandwidth as in nccl-tests: size is the all_reduce buffer and the
all_gather output; busbw = size / time * 2(n-1)/n for all_reduce and (n-1)/n
for all_gather.

The neuron backend runs gloo's algorithms on zero-copy host aliases of device
memory, and checks before each collective that all ranks run the same one
(shapes, dtypes, op; through shared memory between ranks of one host): with
the check on (the default, what users get) the ratio should be ~1 (target >=
0.9). `--checks off` measures the data path alone (TORCHNEURON_COLLECTIVE_CHECKS=0),
`--checks network` the check through gloo that groups spanning hosts use.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

MiB = 1 << 20
BLOCK_SECONDS = 0.05
CHECK_MODES = {"on": "1", "off": "0", "network": "network"}


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


def _block(fn, reps: int, gloo) -> float:
    """Seconds per collective on the slowest rank, over `reps` back-to-back calls started together."""
    dist.barrier(group=gloo)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return _slowest_rank((time.perf_counter() - t0) / reps, gloo)


def _bench_rank(rank: int, world: int, port: int, sizes_mib: list[int], rounds: int, queue) -> None:
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning)  # all_gather_into_tensor's rename in 2.13
    torch.set_num_threads(1)
    torch.neuron.set_device(rank)
    dev = torch.device("neuron", rank)
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    for op in ("all_reduce", "all_gather_into_tensor"):
        for mib in sizes_mib:
            run, factor = _collectives(op, mib * MiB // 4, world, dev, gloo)
            for fn in list(run.values()) * 2:  # warm up both paths
                fn()
            reps = max(1, min(20, math.ceil(BLOCK_SECONDS / _block(run["gloo"], 1, gloo))))
            times = {"neuron": [], "gloo": []}
            for r in range(rounds):
                for kind in (("neuron", "gloo") if r % 2 else ("gloo", "neuron")):
                    times[kind].append(_block(run[kind], reps, gloo))
            ratio = statistics.median(g / n for g, n in zip(times["gloo"], times["neuron"]))
            busbw = {k: mib * MiB / statistics.median(t) * factor / 1e9 for k, t in times.items()}
            if rank == 0:
                queue.put((world, op, mib, busbw["neuron"], busbw["gloo"], ratio))
            del run
    if rank == 0:
        queue.put(None)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sweep(ranks: list[int], sizes: list[int], rounds: int, checks: str) -> list[tuple]:
    os.environ["TORCHNEURON_COLLECTIVE_CHECKS"] = CHECK_MODES[checks]  # read by the spawned ranks
    label = {"on": "on (default: shared memory)", "off": "off (data path only)",
             "network": "through gloo (as groups spanning hosts)"}[checks]
    print(f"\ncollective checks {label}")
    print(f"{'ranks':>5} {'collective':<24} {'size':>7} {'neuron GB/s':>12} {'gloo GB/s':>10} {'ratio':>6}")
    ctx = mp.get_context("spawn")
    rows = []
    for world in ranks:
        queue = ctx.SimpleQueue()
        procs = mp.start_processes(_bench_rank, args=(world, _free_port(), sizes, rounds, queue), nprocs=world,
                                   start_method="spawn", join=False)
        while (row := queue.get()) is not None:
            w, op, mib, neuron, gloo, ratio = row
            rows.append(row)
            print(f"{w:>5} {op:<24} {mib:>4} MiB {neuron:>12.3f} {gloo:>10.3f} {ratio:>6.2f}", flush=True)
        while not procs.join():
            pass
    print(f"lowest ratio: {min(r[-1] for r in rows):.2f} (target >= 0.9)")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64], help="MiB")
    parser.add_argument("--rounds", type=int, default=9, help="paired blocks per cell; medians count")
    parser.add_argument("--checks", choices=["on", "off", "network", "both"], default="on",
                        help="the pre-collective check of the neuron backend; both: off, then on")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"neuron c10d backend vs gloo on CPU tensors; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; medians of {args.rounds} interleaved rounds")
    for checks in (["off", "on"] if args.checks == "both" else [args.checks]):
        _sweep(args.ranks, args.sizes, args.rounds, checks)


if __name__ == "__main__":
    main()
