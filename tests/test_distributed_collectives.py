"""Every collective of the neuron c10d backend against the same collective of gloo on CPU tensors.

Three runs: two torchrun agents (two emulated hosts, 2 ranks each: data and
pre-collective check through gloo, as between real hosts), and one agent of 4
ranks (one host: data and check through shared memory), also with device
memory guarded (TORCHNEURON_STRICT_MEMORY=1); rendezvous on
127.0.0.1, the agents execute this file as their script. Each rank runs each
collective on neuron tensors over the "neuron" group and on CPU copies over a
gloo group, and compares: bit-exact for integers, allclose for floats (on
shared memory, floats also bit-exact against the sum in rank order, the
documented order). Tensors larger than a shared-memory slot (1 MiB) check the
pieces. Also: async handles, futures, object collectives, subgroups, a
DeviceMesh made by split_group, that collectives take no device memory, and
that no shared-memory segment is left behind.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

EXPECTED_CHECKS = 103  # per rank (the fewest any variant runs: two_hosts); guards against checks silently not running


# (torchrun agents, ranks per agent, environment, how the world group checks, how it moves data)
LAYOUTS = {
    # Ranks of two real hosts cannot share memory: check and data go through gloo, as forced here.
    "two_hosts": (2, 2, {"TORCHNEURON_COLLECTIVE_CHECKS": "network", "TORCHNEURON_SHM_COLLECTIVES": "0"},
                  "network", "gloo"),
    # One host: check (SignatureBoard) and data (SharedMemoryCollectives) through shared memory, the default.
    # Device memory of the ranks in shared arenas the peers map: large collectives read the peers' tensors.
    "one_host": (1, 4, {}, "shared memory", "shared memory (peer device memory)"),
    # The same where ranks may not read each other's memory (e.g. Yama ptrace_scope 2): every size through the slots.
    "one_host_staging": (1, 4, {"TORCHNEURON_SHM_DIRECT": "0"}, "shared memory", "shared memory (staging)"),
    # The same with device memory inaccessible outside the host bridge (docs/runtime.md): the shared-memory
    # path reaches device memory only through the bridge, as it would have to on a real Neuron runtime
    # (each allocation on pages of its own: no shared arena; large copies read the peers with process_vm_readv).
    "one_host_strict_memory": (1, 4, {"TORCHNEURON_STRICT_MEMORY": "1"}, "shared memory", "shared memory (direct reads)"),
}


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
def test_collectives_match_gloo(layout):
    from test_distributed_launch import dist_env, free_port, run_together, torchrun_cmd

    agents, per_agent, extra_env, transport, data = LAYOUTS[layout]
    if os.environ.get("TORCHNEURON_STRICT_MEMORY") == "1" and data.endswith("(peer device memory)"):
        data = LAYOUTS["one_host_strict_memory"][4]  # test_strict_memory runs one_host so: strict shares no arena
    port = free_port()
    env = dist_env(**extra_env)
    results = run_together([torchrun_cmd("test_distributed_collectives.py", per_agent, nnodes=agents, node_rank=n,
                                         port=port) for n in range(agents)], timeout=270, envs=[env] * agents)
    out = "".join(text for _, text in results)
    for code, text in results:
        assert code == 0, text[-6000:]
    assert "FAIL" not in out, out
    for rank in range(agents * per_agent):
        assert f"rank {rank} bound to neuron:{rank % per_agent}" in out, out
        assert f"rank {rank} checks collectives through {transport}" in out, out
        assert f"rank {rank} moves data through {data}" in out, out
        if "TORCHNEURON_STRICT_MEMORY" in extra_env:
            assert f"rank {rank} guards device memory: True" in out, out
        n = out.count(f"[{rank}] ok ")  # not per line: two ranks' prints can interleave on one line
        assert n >= EXPECTED_CHECKS, f"rank {rank} ran only {n} checks:\n{out}"
    # Every segment is unlinked once all ranks mapped it: nothing of these ranks is left in /dev/shm.
    pids = set(re.findall(r"rank \d+ has pid (\d+)", out))  # not per line: prints of two ranks may interleave
    assert len(pids) == agents * per_agent, out
    left = [n for n in os.listdir("/dev/shm") if n.startswith("torchneuron-") and n.split("-")[-2] in pids]
    assert not left, left


# ---- the worker: run by torchrun ----------------------------------------------------------------------------

class Rank:
    """What every check needs: this rank, the device, the gloo reference group, and the verdicts so far."""

    def __init__(self, rank: int, world: int, local: int, gloo) -> None:
        import torch
        self.rank, self.world, self.local, self.gloo = rank, world, local, gloo
        self.shared_memory = False  # whether the world group moves data through shared memory
        self.dev = torch.device("neuron", local)
        self.failures: list[str] = []

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        if ok:
            print(f"[{self.rank}] ok {name}", flush=True)
        else:
            self.failures.append(name)
            print(f"[{self.rank}] FAIL {name} {detail}", flush=True)

    def same(self, name: str, got, want) -> None:
        """Bit-exact for integers, allclose for floats."""
        import torch
        got = got.cpu()
        if got.dtype != want.dtype or got.shape != want.shape:
            return self.check(name, False, f"{got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}")
        if want.is_floating_point():
            tol = 1e-2 if want.dtype in (torch.bfloat16, torch.float16) else 1e-5
            ok = torch.allclose(got.float(), want.float(), rtol=tol, atol=tol)
        else:
            ok = torch.equal(got, want)
        self.check(name, ok, f"max diff {(got.double() - want.double()).abs().max().item()}" if not ok else "")

    def data(self, shape, dtype, salt=0, r=None):
        """Rank r's (default: this rank's) input: the same on every rank that asks."""
        import torch
        g = torch.Generator().manual_seed(1000 * (self.rank if r is None else r) + salt)
        if dtype.is_floating_point:
            return torch.randn(shape, generator=g).to(dtype)
        if dtype == torch.uint8:
            return torch.randint(0, 4, shape, generator=g, dtype=dtype)
        return torch.randint(-50, 50, shape, generator=g).to(dtype)


def check_all_reduce(t: Rank) -> None:
    """Every op Neuron reduces with, float and integer dtypes, in place; and the reductions gloo lacks, done
    around it."""
    import torch
    import torch.distributed as dist
    R = dist.ReduceOp
    floats, ints = [torch.float32, torch.bfloat16, torch.float16], [torch.int64, torch.int32, torch.uint8]
    for dtype in floats + ints:
        ops = [R.SUM, R.MIN, R.MAX] + ([R.AVG] if dtype.is_floating_point else [])
        for op in ops:
            x = t.data((37, 5), dtype, salt=int(op))
            n, c = x.to(t.dev), x.clone()
            ptr = n.data_ptr()
            dist.all_reduce(n, op=op)
            dist.all_reduce(c, op=op, group=t.gloo)
            assert n.data_ptr() == ptr
            t.same(f"all_reduce {op} {dtype}", n, c)
            if t.shared_memory and op == R.SUM:  # the documented order: rank 0 + rank 1 + ... , left to right
                want = t.data((37, 5), dtype, salt=int(op), r=0)
                for r in range(1, t.world):
                    want = want + t.data((37, 5), dtype, salt=int(op), r=r)
                t.check(f"all_reduce SUM {dtype} in rank order", torch.equal(n.cpu(), want))
    # integer AVG truncates, as NCCL; PREMUL_SUM scales, then sums
    x = t.data((64,), torch.int64)
    n, c = x.to(t.dev), x.clone()
    dist.all_reduce(n, op=R.AVG)
    dist.all_reduce(c, group=t.gloo)
    t.same("all_reduce AVG int64", n, torch.div(c, t.world, rounding_mode="trunc"))
    x = t.data((64,), torch.float32)
    n, c = x.to(t.dev), x.clone()
    dist.all_reduce(n, op=dist._make_nccl_premul_sum(0.25))
    dist.all_reduce(c, group=t.gloo)
    t.same("all_reduce PREMUL_SUM", n, c * 0.25)


def check_gathers(t: Rank) -> None:
    import torch
    import torch.distributed as dist
    world = t.world
    x = t.data((6, 3), torch.float32, salt=1)
    outs = [torch.empty_like(x, device=t.dev) for _ in range(world)]
    refs = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(outs, x.to(t.dev))
    dist.all_gather(refs, x, group=t.gloo)
    t.same("all_gather", torch.stack(outs), torch.stack(refs))
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        x = t.data((5, 4), dtype, salt=2)
        n, c = torch.empty(world * 5, 4, dtype=dtype, device=t.dev), torch.empty(world * 5, 4, dtype=dtype)
        dist.all_gather_into_tensor(n, x.to(t.dev))
        dist.all_gather_into_tensor(c, x, group=t.gloo)
        t.same(f"all_gather_into_tensor {dtype}", n, c)
    x = t.data((3,), torch.float32, salt=3)
    gathered = [torch.empty(3, device=t.dev) for _ in range(world)] if t.rank == 2 else None
    dist.gather(x.to(t.dev), gathered, dst=2)
    if t.rank == 2:
        want = torch.stack([t.data((3,), torch.float32, 3, r) for r in range(world)])
        t.same("gather", torch.stack(gathered), want)
    else:
        t.check("gather", True)


def check_reduce_scatters(t: Rank) -> None:
    import torch
    import torch.distributed as dist
    R, world = dist.ReduceOp, t.world
    for op in (R.SUM, R.AVG, R.MAX):
        x = t.data((world * 8, 3), torch.float32, salt=4)
        n, c = torch.empty(8, 3, device=t.dev), torch.empty(8, 3)
        dist.reduce_scatter_tensor(n, x.to(t.dev), op=op)
        dist.reduce_scatter_tensor(c, x, op=op, group=t.gloo)
        t.same(f"reduce_scatter_tensor {op}", n, c)
    x = t.data((world * 8,), torch.int64, salt=5)
    n, c = torch.empty(8, dtype=torch.int64, device=t.dev), torch.empty(8, dtype=torch.int64)
    dist.reduce_scatter_tensor(n, x.to(t.dev))
    dist.reduce_scatter_tensor(c, x, group=t.gloo)
    t.same("reduce_scatter_tensor int64", n, c)
    x = t.data((world * 8,), torch.float32, salt=6)
    xn = x.to(t.dev)
    n = torch.empty(8, device=t.dev)
    dist.reduce_scatter_tensor(n, xn, op=dist._make_nccl_premul_sum(0.5))
    dist.reduce_scatter_tensor(c := torch.empty(8), x, group=t.gloo)
    t.same("reduce_scatter_tensor PREMUL_SUM", n, c * 0.5)
    t.same("reduce_scatter_tensor PREMUL_SUM leaves its input", xn, x)
    chunks = [t.data((4,), torch.float32, salt=7 + i) for i in range(world)]
    n, c = torch.empty(4, device=t.dev), torch.empty(4)
    dist.reduce_scatter(n, [x.to(t.dev) for x in chunks])
    dist.reduce_scatter(c, [x.clone() for x in chunks], group=t.gloo)
    t.same("reduce_scatter", n, c)


def check_rooted(t: Rank) -> None:
    """broadcast, reduce, scatter."""
    import torch
    import torch.distributed as dist
    x = t.data((10,), torch.float32, salt=20)
    n, c = x.to(t.dev), x.clone()
    dist.broadcast(n, src=1)
    dist.broadcast(c, src=1, group=t.gloo)
    t.same("broadcast", n, c)
    x = t.data((10,), torch.int64, salt=21)
    n, c = x.to(t.dev), x.clone()
    dist.reduce(n, dst=1)
    dist.reduce(c, dst=1, group=t.gloo)
    if t.rank == 1:
        t.same("reduce", n, c)
    else:
        t.check("reduce", True)
    parts = [t.data((2, 2), torch.float32, salt=22, r=3) + i for i in range(t.world)]
    n = torch.empty(2, 2, device=t.dev)
    dist.scatter(n, [p.to(t.dev) for p in parts] if t.rank == 3 else None, src=3)
    t.same("scatter", n, parts[t.rank])


def check_all_to_all(t: Rank) -> None:
    """List form, single tensor without and with (even) split sizes."""
    import torch
    import torch.distributed as dist
    rank, world = t.rank, t.world
    ins = [t.data((2,), torch.float32, salt=30 + i) for i in range(world)]
    outs, refs = [torch.empty(2, device=t.dev) for _ in range(world)], [torch.empty(2) for _ in range(world)]
    dist.all_to_all(outs, [x.to(t.dev) for x in ins])
    dist.all_to_all(refs, [x.clone() for x in ins], group=t.gloo)
    t.same("all_to_all", torch.stack(outs), torch.stack(refs))
    x = t.data((world * 3,), torch.int64, salt=31)
    n, c = torch.empty(world * 3, dtype=torch.int64, device=t.dev), torch.empty(world * 3, dtype=torch.int64)
    dist.all_to_all_single(n, x.to(t.dev))
    dist.all_to_all_single(c, x, group=t.gloo)
    t.same("all_to_all_single", n, c)
    splits = [2] * world  # even split sizes, given explicitly (uneven ones are refused: check_refusals)
    x = t.data((2 * world, 3), torch.float32, salt=32)
    n, c = torch.empty(2 * world, 3, device=t.dev), torch.empty(2 * world, 3)
    dist.all_to_all_single(n, x.to(t.dev), splits, splits)
    dist.all_to_all_single(c, x, splits, splits, group=t.gloo)
    t.same("all_to_all_single with split sizes", n, c)
    # a permutation (whole tensor to the next rank: permute_tensor, ring attention's backward) is accepted
    nxt, prv = (t.rank + 1) % world, (t.rank - 1) % world
    send, recv = [6 * (j == nxt) for j in range(world)], [6 * (j == prv) for j in range(world)]
    x = t.data((6, 3), torch.float32, salt=33)
    n, c = torch.empty(6, 3, device=t.dev), torch.empty(6, 3)
    dist.all_to_all_single(n, x.to(t.dev), recv, send)
    dist.all_to_all_single(c, x, recv, send, group=t.gloo)
    t.same("all_to_all_single as a permutation", n, c)


def check_pieces(t: Rank) -> None:
    """Tensors larger than a shared-memory slot (1 MiB), of sizes that do not divide evenly, move in pieces."""
    import torch
    import torch.distributed as dist
    world, big = t.world, 3 * (1 << 18) + 7  # 3 MiB of float32 and a bit
    x = t.data((big,), torch.float32, salt=60)
    n, c = x.to(t.dev), x.clone()
    dist.all_reduce(n)
    dist.all_reduce(c, group=t.gloo)
    t.same("all_reduce in pieces", n, c)
    x = t.data((big,), torch.bfloat16, salt=61)
    n, c = x.to(t.dev), x.clone()
    dist.all_reduce(n, op=dist.ReduceOp.MAX)
    dist.all_reduce(c, op=dist.ReduceOp.MAX, group=t.gloo)
    t.same("all_reduce MAX bfloat16 in pieces", n, c)
    x = t.data((big,), torch.int64, salt=62)
    n, c = torch.empty(world * big, dtype=torch.int64, device=t.dev), torch.empty(world * big, dtype=torch.int64)
    dist.all_gather_into_tensor(n, x.to(t.dev))
    dist.all_gather_into_tensor(c, x, group=t.gloo)
    t.same("all_gather_into_tensor in pieces", n, c)
    x = t.data((world * big,), torch.float32, salt=63)
    n, c = torch.empty(big, device=t.dev), torch.empty(big)
    dist.reduce_scatter_tensor(n, x.to(t.dev), op=dist.ReduceOp.AVG)
    dist.reduce_scatter_tensor(c, x, op=dist.ReduceOp.AVG, group=t.gloo)
    t.same("reduce_scatter_tensor AVG in pieces", n, c)
    x = t.data((big,), torch.float16, salt=64)
    n, c = x.to(t.dev), x.clone()
    dist.broadcast(n, src=2)
    dist.broadcast(c, src=2, group=t.gloo)
    t.same("broadcast in pieces", n, c)
    x = t.data((2 * big,), torch.float32, salt=68)  # 6 MiB: the others read the root's memory directly
    n, c = x.to(t.dev), x.clone()
    dist.broadcast(n, src=1)
    dist.broadcast(c, src=1, group=t.gloo)
    t.same("broadcast of 6 MiB", n, c)
    x = t.data((big,), torch.int32, salt=65)
    n, c = x.to(t.dev), x.clone()
    dist.reduce(n, dst=3, op=dist.ReduceOp.MIN)
    dist.reduce(c, dst=3, op=dist.ReduceOp.MIN, group=t.gloo)
    if t.rank == 3:
        t.same("reduce in pieces", n, c)
    elif t.shared_memory:
        t.same("reduce in pieces leaves the others' input", n, x)  # gloo may use it as scratch space
    else:
        t.check("reduce in pieces", True)
    x = t.data((world * 300_001,), torch.float32, salt=66)  # 1.2 MiB per peer, in pieces
    n, c = torch.empty(world * 300_001, device=t.dev), torch.empty(world * 300_001)
    dist.all_to_all_single(n, x.to(t.dev))
    dist.all_to_all_single(c, x, group=t.gloo)
    t.same("all_to_all_single in pieces", n, c)
    # a non-contiguous output (through a contiguous copy)
    x = t.data((6, 4), torch.float32, salt=67)
    n, c = torch.empty(4, world * 6, device=t.dev).t(), torch.empty(world * 6, 4)
    dist.all_gather_into_tensor(n, x.to(t.dev))
    dist.all_gather_into_tensor(c, x, group=t.gloo)
    t.same("all_gather_into_tensor into a transposed output", n, c)


def check_peer_memory(t: Rank) -> None:
    """Large reductions in the documented rank order on every path; tensors outside the peers' reach on
    some ranks only (allocated before the group existed) take the staging path on every rank."""
    import torch
    import torch.distributed as dist
    big = 3 * (1 << 18) + 7
    for dtype in (torch.float32, torch.bfloat16):
        x = t.data((big,), dtype, salt=70)
        n, c = x.to(t.dev), x.clone()
        dist.all_reduce(n)
        if t.shared_memory:  # bit-exact in the documented order (gloo's order differs: bfloat16 by more than 1e-2)
            want = t.data((big,), dtype, salt=70, r=0)
            for r in range(1, t.world):
                want = want + t.data((big,), dtype, salt=70, r=r)
            t.check(f"all_reduce of 3 MiB {dtype} in rank order", torch.equal(n.cpu(), want))
        else:
            dist.all_reduce(c, group=t.gloo)
            t.same(f"all_reduce of 3 MiB {dtype}", n, c)
    x = t.data((t.world * big,), torch.float32, salt=71)
    n = torch.empty(big, device=t.dev)
    dist.reduce_scatter_tensor(n, x.to(t.dev))
    want = t.data((t.world * big,), torch.float32, salt=71, r=0)[t.rank * big:(t.rank + 1) * big]
    for r in range(1, t.world):
        want = want + t.data((t.world * big,), torch.float32, salt=71, r=r)[t.rank * big:(t.rank + 1) * big]
    t.same("reduce_scatter_tensor of 12 MiB", n, want)
    if t.shared_memory:
        t.check("reduce_scatter_tensor of 12 MiB in rank order", torch.equal(n.cpu(), want))
    # Odd ranks' tensors were allocated before the group: the ranks agree on the staging path.
    x = t.data((big,), torch.float32, salt=72)
    n = t.early.copy_(x) if t.rank % 2 else x.to(t.dev)
    c = x.clone()
    dist.all_reduce(n)
    dist.all_reduce(c, group=t.gloo)
    t.same("all_reduce of tensors in the peers' reach on some ranks only", n, c)
    out, ref = torch.empty(t.world * big, device=t.dev), torch.empty(t.world * big)
    dist.all_gather_into_tensor(out, n)
    dist.all_gather_into_tensor(ref, c, group=t.gloo)
    t.same("all_gather_into_tensor of tensors in the peers' reach on some ranks only", out, ref)


def check_point_to_point(t: Rank) -> None:
    """A ring: blocking, async, batched."""
    import torch
    import torch.distributed as dist
    nxt, prv = (t.rank + 1) % t.world, (t.rank - 1) % t.world
    x = t.data((7,), torch.float32, salt=40)
    want = t.data((7,), torch.float32, 40, prv)
    got = torch.empty(7, device=t.dev)
    if t.rank % 2 == 0:
        dist.send(x.to(t.dev), nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(x.to(t.dev), nxt)
    t.same("send/recv", got, want)
    got = torch.empty(7, device=t.dev)
    for q in [dist.isend(x.to(t.dev), nxt), dist.irecv(got, prv)]:
        q.wait()
    t.same("isend/irecv", got, want)
    got = torch.empty(7, device=t.dev)
    for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, x.to(t.dev), nxt), dist.P2POp(dist.irecv, got, prv)]):
        q.wait()
    t.same("batch_isend_irecv", got, want)
    # More messages in flight than a pair of ranks has slots on shared memory (16), every rank sending all before
    # receiving any; of several sizes, dtypes and layouts (non-contiguous both ends; CPU tensors on the same group).
    shapes = [((7,), torch.float32), ((3, 4), torch.bfloat16), ((1 << 19,), torch.float32), ((2, 5), torch.int32)]
    sent = [t.data(*shapes[i % 4], salt=60 + i) for i in range(20)]
    want = [t.data(*shapes[i % 4], 60 + i, prv) for i in range(20)]

    def on_device(x, transposed):  # a 2-D tensor as the transpose of a contiguous one: not contiguous
        return x.to(t.dev).t().contiguous().t() if transposed else x.to(t.dev)

    outs = [on_device(torch.zeros_like(w), w.dim() == 2) for w in want]
    works = [dist.isend(on_device(x, x.dim() == 2), nxt) for x in sent]
    works += [dist.irecv(o, prv) for o in outs]
    for q in works:
        q.wait()
    t.check("20 isends then 20 irecvs around the ring", all(torch.equal(o.cpu(), w) for o, w in zip(outs, want)))
    try:  # the group serves neuron tensors only, as TorchNeuron's backend: a CPU send is refused where it is made
        dist.isend(torch.ones(7), nxt)
        refused = False
    except RuntimeError as e:
        refused = "No backend type associated with device type cpu" in str(e)
    t.check("send of a CPU tensor on the neuron group refused", refused)


def check_async(t: Rank) -> None:
    """Handles, futures (their value is the neuron tensor), several in flight, functional collectives."""
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    x = t.data((1000,), torch.float32, salt=50)
    n, c = x.to(t.dev), x.clone()
    work = dist.all_reduce(n, async_op=True)
    work.wait()
    dist.all_reduce(c, group=t.gloo)
    t.same("async all_reduce wait()", n, c)
    t.check("async work completed", work.is_completed() and work.is_success())
    n = x.to(t.dev)
    value = dist.all_reduce(n, async_op=True).get_future().wait()
    t.check("future yields the neuron tensor", value[0].device == t.dev and value[0].data_ptr() == n.data_ptr())
    t.same("future value", value[0], c)
    works = [dist.all_gather_into_tensor(torch.empty(t.world * 4, device=t.dev), torch.ones(4, device=t.dev) * t.rank,
                                         async_op=True) for _ in range(3)]
    for w in works:
        w.wait()
    t.check("several async collectives in flight", all(w.is_completed() for w in works))
    reduced = funcol.all_reduce(x.to(t.dev), "sum", dist.group.WORLD)
    t.same("functional all_reduce", funcol.wait_tensor(reduced), c)


def check_refusals(t: Rank) -> None:
    """What TorchNeuron's ProcessGroupNeuron refuses, every rank raises, before any data moves: also when only
    one rank's arguments are wrong (the root's list of scatter inputs, one rank's empty tensor), where that
    rank raises its reason and the others name it. The group stays usable afterwards."""
    import torch
    import torch.distributed as dist
    R, world, root = dist.ReduceOp, t.world, t.rank == 0
    x = t.data((10,), torch.float32, salt=80)

    def refused(name, call, match, mine=True, others=r"rank 0 ran .* with arguments it refused"):
        """`call` raises on this rank: `match` if this rank's arguments are refused (`mine`), else `others`."""
        try:
            call()
        except (ValueError, RuntimeError) as e:
            import re
            ok = re.search(match if mine else others, str(e)) is not None
            return t.check(f"refused: {name}", ok, str(e)[:300])
        t.check(f"refused: {name}", False, "did not raise")

    n = x.to(t.dev)
    refused("broadcast from root 999", lambda: dist.broadcast(n, src=999),
            r"ValueError|Invalid rootRank 999 for broadcast with world size")
    t.same("broadcast from root 999 leaves the tensor", n, x)  # it zeroed every rank's tensor before
    refused("reduce to rank world+1", lambda: dist.reduce(n, dst=world + 1), f"Invalid rootRank {world + 1} for reduce")
    for op in (R.PRODUCT, R.BAND, R.BOR, R.BXOR):
        m = torch.ones(4, dtype=torch.int32, device=t.dev)
        refused(f"all_reduce {op}", lambda: dist.all_reduce(m, op=op), f"unsupported reduce operation '{op.name}'")
    refused("reduce_scatter_tensor PRODUCT",
            lambda: dist.reduce_scatter_tensor(torch.empty(2, device=t.dev), torch.ones(2 * world, device=t.dev),
                                               op=R.PRODUCT), r"unsupported reduce operation 'PRODUCT'.*supported ops")
    refused("all_reduce of an empty tensor", lambda: dist.all_reduce(torch.ones(0, device=t.dev)),
            r"tensors cannot be empty, found empty tensors at indices: \[0\]")
    refused("gather of an empty tensor",
            lambda: dist.gather(torch.ones(0, device=t.dev), [torch.ones(0, device=t.dev) for _ in range(world)]
                                if root else None, dst=0), "tensors cannot have zero size in dimension 0")
    # only one rank's tensor is empty: the others (whose all_reduce may have started) raise too
    refused("all_reduce where rank 0's tensor is empty",
            lambda: dist.all_reduce(torch.ones(0 if root else 5, device=t.dev)), "tensors cannot be empty", mine=root)
    # the root's arguments: only it can tell
    refused("scatter of inputs of another shape",
            lambda: dist.scatter(torch.zeros(10, device=t.dev),
                                 [torch.ones(10 + i, device=t.dev) for i in range(world)] if root else None, src=0),
            r"input shape mismatch, expected \[10\]", mine=root)
    refused("scatter of world+1 inputs",
            lambda: dist.scatter(torch.zeros(10, device=t.dev),
                                 [torch.ones(10, device=t.dev) for _ in range(world + 1)] if root else None, src=0),
            rf"number of input tensors \({world + 1}\) must equal world size \({world}\)", mine=root)
    refused("gather into world-1 outputs",
            lambda: dist.gather(x.to(t.dev), [torch.empty(10, device=t.dev) for _ in range(world - 1)] if root else None,
                                dst=0), rf"number of output tensors \({world - 1}\) must equal world size", mine=root)
    refused("all_gather into outputs of another shape",
            lambda: dist.all_gather([torch.empty(11, device=t.dev) for _ in range(world)], x.to(t.dev)),
            r"output shape mismatch, expected \[10\]")
    refused("all_gather_into_tensor of the wrong size",
            lambda: dist.all_gather_into_tensor(torch.empty(world * 10 + 1, device=t.dev), x.to(t.dev)),
            "output shape mismatch")
    refused("reduce_scatter_tensor of an input that does not divide",
            lambda: dist.reduce_scatter_tensor(torch.empty(3, device=t.dev), torch.ones(3 * world + 1, device=t.dev)),
            "must be evenly divisible by replica group size")
    refused("all_to_all_single with uneven split sizes",
            lambda: dist.all_to_all_single(torch.empty(world + 1, device=t.dev), torch.ones(world + 1, device=t.dev),
                                           [2] + [1] * (world - 1), [2] + [1] * (world - 1)),
            "Only even split sizes are supported")
    refused("all_to_all of inputs of two shapes",
            lambda: dist.all_to_all([torch.empty(2, device=t.dev) for _ in range(world)],
                                    [torch.ones(2 + (i == 1), device=t.dev) for i in range(world)]),
            "all input tensors must have same shape, but found")
    refused("CPU tensors on the neuron group", lambda: dist.all_reduce(torch.ones(3)),
            "No backend type associated with device type cpu")
    refused("a CPU tensor among neuron tensors",
            lambda: dist.all_gather([torch.empty(10) for _ in range(world)], x.to(t.dev)),
            "Expected neuron device, got cpu.*gloo")
    n, c = x.to(t.dev), x.clone()
    dist.all_reduce(n)
    dist.all_reduce(c, group=t.gloo)
    t.same("all_reduce after the refusals", n, c)
    w1, w2 = dist.all_reduce(n, async_op=True), dist.all_reduce(n, async_op=True)
    t.check("works number the group's collectives", w2.get_sequence_number() == w1.get_sequence_number() + 1,
            f"{w1.get_sequence_number()} {w2.get_sequence_number()}")


def check_barriers_and_objects(t: Rank) -> None:
    """Barriers and object collectives on the neuron group itself (neuron tensors: the backend serves only them)."""
    import torch.distributed as dist
    dist.barrier()
    dist.barrier(device_ids=[t.local])
    t.check("barriers", True)
    objs = [None] * t.world
    dist.all_gather_object(objs, {"rank": t.rank})
    t.check("all_gather_object", objs == [{"rank": r} for r in range(t.world)])


def check_mesh(t: Rank, how: str) -> None:
    """A 2x2 DeviceMesh: its groups reduce over the right ranks, and DTensor runs on it."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    rank = t.rank
    mesh = init_device_mesh("neuron", (2, 2), mesh_dim_names=("dp", "tp"))
    tp = mesh.get_group("tp")
    t.check(f"{how} mesh group backend", dist.get_backend(tp) == "neuron", dist.get_backend(tp))
    n = torch.full((3,), float(rank), device=t.dev)
    dist.all_reduce(n, group=tp)
    first = rank - rank % 2
    t.check(f"{how} mesh tp all_reduce", n.cpu().tolist() == [float(first + first + 1)] * 3, str(n.cpu()))
    n = torch.full((3,), float(rank), device=t.dev)
    dist.all_reduce(n, group=mesh.get_group("dp"))
    t.check(f"{how} mesh dp all_reduce", n.cpu().tolist() == [float(rank % 2 * 2 + 2)] * 3, str(n.cpu()))
    full = torch.arange(16.0).reshape(4, 4)
    d = distribute_tensor(full.to(t.dev), mesh, [Shard(0), Replicate()])
    t.check(f"{how} DTensor on the mesh", d.to_local().device == t.dev and torch.equal(d.full_tensor().cpu(), full))


def check_subgroups(t: Rank) -> None:
    """new_group across the two hosts, and a DeviceMesh made with new_group (the world is not bound)."""
    import torch
    import torch.distributed as dist
    evens, odds = dist.new_group([0, 2]), dist.new_group([1, 3])
    n = torch.full((4,), float(t.rank), device=t.dev)
    dist.all_reduce(n, group=evens if t.rank % 2 == 0 else odds)
    t.check("new_group all_reduce", n.cpu().tolist() == [float(t.rank % 2 * 2 + 2)] * 4, str(n.cpu()))
    check_mesh(t, "new_group")


def check_zero_copy(t: Rank) -> None:
    """Collectives take no device memory beyond their outputs."""
    import torch
    import torch.distributed as dist
    big = torch.ones(4 << 20, device=t.dev)  # 16 MiB
    out = torch.empty(t.world * (4 << 20), device=t.dev)
    torch.neuron.reset_peak_memory_stats(t.dev)
    before = torch.neuron.memory_allocated(t.dev)
    dist.all_reduce(big)
    dist.all_gather_into_tensor(out, big)
    dist.reduce_scatter_tensor(big, out)
    t.check("no device staging", torch.neuron.max_memory_allocated(t.dev) == before,
            f"{torch.neuron.max_memory_allocated(t.dev) - before} extra bytes")


def check_bound_world(t: Rank) -> None:
    """A world bound to its device (what init_process_group(..., device_id=dev) sets): DeviceMesh and
    split_group then split the parent backend instead of creating groups from scratch."""
    import torch
    import torch.distributed as dist
    dist.group.WORLD.bound_device_id = t.dev
    check_mesh(t, "split_group")
    pair = dist.split_group(split_ranks=[[0, 1], [2, 3]])  # one pair per host
    n = torch.full((2,), float(t.rank), device=t.dev)
    dist.all_reduce(n, group=pair)
    t.check("split_group all_reduce", n.cpu().tolist() == [float(t.rank // 2 * 4 + 1)] * 2, str(n.cpu()))


CHECKS = [check_all_reduce, check_gathers, check_reduce_scatters, check_rooted, check_refusals, check_all_to_all,
          check_pieces,
          check_peer_memory, check_point_to_point, check_async, check_barriers_and_objects, check_subgroups, check_zero_copy,
          check_bound_world]  # the bound world last: it changes how later groups are made


def _worker() -> None:
    import torch
    import torch.distributed as dist
    import torch_neuronx

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    assert torch.neuron.current_device() == local, (torch.neuron.current_device(), local)
    print(f"rank {rank} bound to neuron:{local}", flush=True)
    early = torch.empty(3 * (1 << 18) + 7, device=torch.device("neuron", local))  # before the group: check_peer_memory
    dist.init_process_group("neuron")  # no device_id, as Transformers does; the bound case comes last
    gloo = dist.new_group(backend="gloo")  # the reference (torch cannot add a gloo group to a neuron-bound world)
    t = Rank(rank, world, local, gloo)
    t.early = early
    backend = dist.group.WORLD._get_backend(t.dev)
    print(f"rank {rank} checks collectives through {backend.check_transport}", flush=True)
    print(f"rank {rank} moves data through {backend.data_transport}", flush=True)
    print(f"rank {rank} has pid {os.getpid()}", flush=True)
    print(f"rank {rank} guards device memory: {torch_neuronx._C._guards_host_access()}", flush=True)
    t.shared_memory = backend.data_transport.startswith("shared memory")
    for check in CHECKS:
        check(t)
    dist.barrier()
    dist.destroy_process_group()
    if t.failures:
        print(f"[{rank}] FAILED: {t.failures}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    _worker()
