"""Bus bandwidth of the neuron c10d backend against gloo on CPU tensors, measured in the same run.

    python bench/collectives.py                          # 2, 4, 8 ranks; 1, 4, 16, 64 MiB; checks on (default)
    python bench/collectives.py --ranks 2 --sizes 1 16 --checks both --seconds 8

Every rank is a process on this host (rendezvous on 127.0.0.1). For each
collective and size, calls of the same collective on neuron tensors over the
"neuron" group and on CPU tensors over a gloo group alternate one by one (gloo
first in even pairs, neuron first in odd ones), so that both see the same
machine load even when it changes within milliseconds (the machine may be
shared). Each call counts as long as its slowest rank took. The table shows the
median busbw of each kind and the median of the per-pair ratios gloo time /
neuron time. Bus bandwidth as in nccl-tests: size is the all_reduce buffer and
the all_gather output; busbw = size / time * 2(n-1)/n for all_reduce and
(n-1)/n for all_gather.

The neuron backend runs gloo's algorithms on zero-copy host aliases of device
memory, and checks before each collective that all ranks run the same one
(shapes, dtypes, op; through shared memory between ranks of one host): with
the check on (the default, what users get) the ratio should be ~1 (target >=
0.9). `--checks off` measures the data path alone (TORCHNEURON_COLLECTIVE_CHECKS=0),
`--checks network` the check through gloo that groups spanning hosts use.
"""

from __future__ import annotations

import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

MiB = 1 << 20
KINDS = ("neuron", "gloo")
MIN_PAIRS, MAX_PAIRS = 9, 400
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


def _bench_rank(rank: int, world: int, port: int, sizes_mib: list[int], seconds: float, queue) -> None:
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
            t0 = time.perf_counter()
            run["gloo"]()
            once = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(once, op=dist.ReduceOp.MAX, group=gloo)
            pairs = max(MIN_PAIRS, min(MAX_PAIRS, int(seconds / 2 / once.item())))
            # One call of each kind per pair, in alternating order, each timed on every rank.
            times = torch.empty(pairs, 2, dtype=torch.float64)
            for i in range(pairs):
                for kind in (("neuron", "gloo") if i % 2 else ("gloo", "neuron")):
                    t0 = time.perf_counter()
                    run[kind]()
                    times[i, KINDS.index(kind)] = time.perf_counter() - t0
            dist.all_reduce(times, op=dist.ReduceOp.MAX, group=gloo)  # each call as long as its slowest rank
            neuron, gloo_t = times[:, 0], times[:, 1]
            ratio = (gloo_t / neuron).median().item()
            busbw = {k: mib * MiB / t.median().item() * factor / 1e9 for k, t in (("neuron", neuron), ("gloo", gloo_t))}
            if rank == 0:
                queue.put((world, op, mib, busbw["neuron"], busbw["gloo"], ratio, pairs))
            del run
    if rank == 0:
        queue.put(None)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sweep(ranks: list[int], sizes: list[int], seconds: float, checks: str) -> list[tuple]:
    os.environ["TORCHNEURON_COLLECTIVE_CHECKS"] = CHECK_MODES[checks]  # read by the spawned ranks
    label = {"on": "on (default: shared memory)", "off": "off (data path only)",
             "network": "through gloo (as groups spanning hosts)"}[checks]
    print(f"\ncollective checks {label}")
    print(f"{'ranks':>5} {'collective':<24} {'size':>7} {'neuron GB/s':>12} {'gloo GB/s':>10} {'ratio':>6} {'pairs':>6}")
    ctx = mp.get_context("spawn")
    rows = []
    for world in ranks:
        queue = ctx.SimpleQueue()
        procs = mp.start_processes(_bench_rank, args=(world, _free_port(), sizes, seconds, queue), nprocs=world,
                                   start_method="spawn", join=False)
        while (row := queue.get()) is not None:
            w, op, mib, neuron, gloo, ratio, pairs = row
            rows.append(row)
            print(f"{w:>5} {op:<24} {mib:>4} MiB {neuron:>12.3f} {gloo:>10.3f} {ratio:>6.2f} {pairs:>6}", flush=True)
        while not procs.join():
            pass
    print(f"lowest ratio: {min(r[5] for r in rows):.2f} (target >= 0.9)")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64], help="MiB")
    parser.add_argument("--seconds", type=float, default=8.0,
                        help="time per cell (both kinds), as pairs of calls: at least %d, at most %d pairs"
                        % (MIN_PAIRS, MAX_PAIRS))
    parser.add_argument("--checks", choices=["on", "off", "network", "both"], default="on",
                        help="the pre-collective check of the neuron backend; both: off, then on")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"neuron c10d backend vs gloo on CPU tensors; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; medians over pairs of calls (one of each kind, alternating order)")
    for checks in (["off", "on"] if args.checks == "both" else [args.checks]):
        _sweep(args.ranks, args.sizes, args.seconds, checks)


if __name__ == "__main__":
    main()
