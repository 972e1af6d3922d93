"""Every collective of the neuron c10d backend against the same collective of gloo on CPU tensors.

Two runs: two torchrun agents (two emulated hosts, 2 ranks each, the
pre-collective check through gloo as between real hosts), and one agent of 4
ranks (one host, the check through shared memory); rendezvous on 127.0.0.1,
the agents execute this file as their script. Each rank runs each collective
on neuron tensors over the "neuron" group and on CPU copies over a gloo group,
and compares: bit-exact for integers, allclose for floats. Also: async handles,
futures, object collectives, subgroups, a DeviceMesh made by split_group, and
that collectives take no device memory (zero-copy).
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

EXPECTED_CHECKS = 78  # per rank; guards against checks silently not running


# (torchrun agents, ranks per agent, TORCHNEURON_COLLECTIVE_CHECKS, how groups spanning the agents check)
LAYOUTS = {
    # Ranks of two real hosts cannot share memory: the pre-collective check goes through gloo, as forced here.
    "two_hosts": (2, 2, "network", "network"),
    # One host: the check goes through shared memory (SignatureBoard), the default.
    "one_host": (1, 4, None, "shared memory"),
}


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
def test_collectives_match_gloo(layout):
    from test_distributed_launch import dist_env, free_port, run_together, torchrun_cmd

    agents, per_agent, checks, transport = LAYOUTS[layout]
    port = free_port()
    env = dist_env(**({"TORCHNEURON_COLLECTIVE_CHECKS": checks} if checks else {}))
    results = run_together([torchrun_cmd("test_distributed_collectives.py", per_agent, nnodes=agents, node_rank=n,
                                         port=port) for n in range(agents)], timeout=270, envs=[env] * agents)
    out = "".join(text for _, text in results)
    for code, text in results:
        assert code == 0, text[-6000:]
    assert "FAIL" not in out, out
    for rank in range(agents * per_agent):
        assert f"rank {rank} bound to neuron:{rank % per_agent}" in out, out
        assert f"rank {rank} checks collectives through {transport}" in out, out
        n = out.count(f"[{rank}] ok ")  # not per line: two ranks' prints can interleave on one line
        assert n >= EXPECTED_CHECKS, f"rank {rank} ran only {n} checks:\n{out}"


# ---- the worker: run by torchrun ----------------------------------------------------------------------------

def _worker() -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    assert torch.neuron.current_device() == local, (torch.neuron.current_device(), local)
    print(f"rank {rank} bound to neuron:{local}", flush=True)
    dev = torch.device("neuron", local)
    dist.init_process_group("neuron")  # no device_id, as Transformers does; the bound case comes last
    gloo = dist.new_group(backend="gloo")  # the reference (torch cannot add a gloo group to a neuron-bound world)
    transport = dist.group.WORLD._get_backend(dev).check_transport
    print(f"rank {rank} checks collectives through {transport}", flush=True)
    failures: list[str] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        if ok:
            print(f"[{rank}] ok {name}", flush=True)
        else:
            failures.append(name)
            print(f"[{rank}] FAIL {name} {detail}", flush=True)

    def same(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
        got = got.cpu()
        if got.dtype != want.dtype or got.shape != want.shape:
            return check(name, False, f"{got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}")
        if want.is_floating_point():
            tol = 1e-2 if want.dtype in (torch.bfloat16, torch.float16) else 1e-5
            ok = torch.allclose(got.float(), want.float(), rtol=tol, atol=tol)
        else:
            ok = torch.equal(got, want)  # integers: bit-exact
        check(name, ok, f"max diff {(got.double() - want.double()).abs().max().item()}" if not ok else "")

    def data(shape, dtype, salt=0, r=None):
        g = torch.Generator().manual_seed(1000 * (rank if r is None else r) + salt)
        if dtype.is_floating_point:
            return torch.randn(shape, generator=g).to(dtype)
        if dtype == torch.uint8:
            return torch.randint(0, 4, shape, generator=g, dtype=dtype)
        return torch.randint(-50, 50, shape, generator=g).to(dtype)

    R = dist.ReduceOp
    floats, ints = [torch.float32, torch.bfloat16, torch.float16], [torch.int64, torch.int32, torch.uint8]

    # all_reduce: every op, float and integer dtypes, against gloo on CPU
    for dtype in floats + ints:
        ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX] + ([R.AVG] if dtype.is_floating_point else [R.BAND, R.BOR, R.BXOR])
        for op in ops:
            x = data((37, 5), dtype, salt=int(op))
            n, c = x.to(dev), x.clone()
            ptr = n.data_ptr()
            dist.all_reduce(n, op=op)
            dist.all_reduce(c, op=op, group=gloo)
            assert n.data_ptr() == ptr
            same(f"all_reduce {op} {dtype}", n, c)

    # reductions gloo lacks, done around it: integer AVG (truncating, as NCCL) and PREMUL_SUM
    x = data((64,), torch.int64)
    n, c = x.to(dev), x.clone()
    dist.all_reduce(n, op=R.AVG)
    dist.all_reduce(c, group=gloo)
    same("all_reduce AVG int64", n, torch.div(c, world, rounding_mode="trunc"))
    x = data((64,), torch.float32)
    n, c = x.to(dev), x.clone()
    dist.all_reduce(n, op=dist._make_nccl_premul_sum(0.25))
    dist.all_reduce(c, group=gloo)
    same("all_reduce PREMUL_SUM", n, c * 0.25)

    # gathers
    x = data((6, 3), torch.float32, salt=1)
    outs = [torch.empty_like(x, device=dev) for _ in range(world)]
    refs = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(outs, x.to(dev))
    dist.all_gather(refs, x, group=gloo)
    same("all_gather", torch.stack(outs), torch.stack(refs))
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        x = data((5, 4), dtype, salt=2)
        n, c = torch.empty(world * 5, 4, dtype=dtype, device=dev), torch.empty(world * 5, 4, dtype=dtype)
        dist.all_gather_into_tensor(n, x.to(dev))
        dist.all_gather_into_tensor(c, x, group=gloo)
        same(f"all_gather_into_tensor {dtype}", n, c)
    x = data((3,), torch.float32, salt=3)
    gathered = [torch.empty(3, device=dev) for _ in range(world)] if rank == 2 else None
    dist.gather(x.to(dev), gathered, dst=2)
    if rank == 2:
        same("gather", torch.stack(gathered), torch.stack([data((3,), torch.float32, 3, r) for r in range(world)]))
    else:
        check("gather", True)

    # reduce-scatters
    for op in (R.SUM, R.AVG, R.MAX):
        x = data((world * 8, 3), torch.float32, salt=4)
        n, c = torch.empty(8, 3, device=dev), torch.empty(8, 3)
        dist.reduce_scatter_tensor(n, x.to(dev), op=op)
        dist.reduce_scatter_tensor(c, x, op=op, group=gloo)
        same(f"reduce_scatter_tensor {op}", n, c)
    x = data((world * 8,), torch.int64, salt=5)
    n, c = torch.empty(8, dtype=torch.int64, device=dev), torch.empty(8, dtype=torch.int64)
    dist.reduce_scatter_tensor(n, x.to(dev))
    dist.reduce_scatter_tensor(c, x, group=gloo)
    same("reduce_scatter_tensor int64", n, c)
    x = data((world * 8,), torch.float32, salt=6)
    xn = x.to(dev)
    n = torch.empty(8, device=dev)
    dist.reduce_scatter_tensor(n, xn, op=dist._make_nccl_premul_sum(0.5))
    dist.reduce_scatter_tensor(c := torch.empty(8), x, group=gloo)
    same("reduce_scatter_tensor PREMUL_SUM", n, c * 0.5)
    same("reduce_scatter_tensor PREMUL_SUM leaves its input", xn, x)
    chunks = [data((4,), torch.float32, salt=7 + i) for i in range(world)]
    n, c = torch.empty(4, device=dev), torch.empty(4)
    dist.reduce_scatter(n, [t.to(dev) for t in chunks])
    dist.reduce_scatter(c, [t.clone() for t in chunks], group=gloo)
    same("reduce_scatter", n, c)

    # rooted collectives
    x = data((10,), torch.float32, salt=20)
    n, c = x.to(dev), x.clone()
    dist.broadcast(n, src=1)
    dist.broadcast(c, src=1, group=gloo)
    same("broadcast", n, c)
    x = data((10,), torch.int64, salt=21)
    n, c = x.to(dev), x.clone()
    dist.reduce(n, dst=1)
    dist.reduce(c, dst=1, group=gloo)
    if rank == 1:
        same("reduce", n, c)
    else:
        check("reduce", True)
    parts = [data((2, 2), torch.float32, salt=22, r=3) + i for i in range(world)]
    n = torch.empty(2, 2, device=dev)
    dist.scatter(n, [p.to(dev) for p in parts] if rank == 3 else None, src=3)
    same("scatter", n, parts[rank])

    # all-to-all: list form, single tensor with equal and uneven splits
    ins = [data((2,), torch.float32, salt=30 + i) for i in range(world)]
    outs, refs = [torch.empty(2, device=dev) for _ in range(world)], [torch.empty(2) for _ in range(world)]
    dist.all_to_all(outs, [t.to(dev) for t in ins])
    dist.all_to_all(refs, [t.clone() for t in ins], group=gloo)
    same("all_to_all", torch.stack(outs), torch.stack(refs))
    x = data((world * 3,), torch.int64, salt=31)
    n, c = torch.empty(world * 3, dtype=torch.int64, device=dev), torch.empty(world * 3, dtype=torch.int64)
    dist.all_to_all_single(n, x.to(dev))
    dist.all_to_all_single(c, x, group=gloo)
    same("all_to_all_single", n, c)
    in_splits = [(rank + i) % 3 + 1 for i in range(world)]
    out_splits = [(r + rank) % 3 + 1 for r in range(world)]
    x = data((sum(in_splits),), torch.float32, salt=32)
    n, c = torch.empty(sum(out_splits), device=dev), torch.empty(sum(out_splits))
    dist.all_to_all_single(n, x.to(dev), out_splits, in_splits)
    dist.all_to_all_single(c, x, out_splits, in_splits, group=gloo)
    same("all_to_all_single uneven", n, c)

    # point to point: a ring, blocking and async
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    x = data((7,), torch.float32, salt=40)
    got = torch.empty(7, device=dev)
    if rank % 2 == 0:
        dist.send(x.to(dev), nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(x.to(dev), nxt)
    same("send/recv", got, data((7,), torch.float32, 40, prv))
    got = torch.empty(7, device=dev)
    reqs = [dist.isend(x.to(dev), nxt), dist.irecv(got, prv)]
    for q in reqs:
        q.wait()
    same("isend/irecv", got, data((7,), torch.float32, 40, prv))
    ops = [dist.P2POp(dist.isend, x.to(dev), nxt), dist.P2POp(dist.irecv, got := torch.empty(7, device=dev), prv)]
    for q in dist.batch_isend_irecv(ops):
        q.wait()
    same("batch_isend_irecv", got, data((7,), torch.float32, 40, prv))

    # async handles and futures
    x = data((1000,), torch.float32, salt=50)
    n, c = x.to(dev), x.clone()
    work = dist.all_reduce(n, async_op=True)
    work.wait()
    dist.all_reduce(c, group=gloo)
    same("async all_reduce wait()", n, c)
    check("async work completed", work.is_completed() and work.is_success())
    n = x.to(dev)
    fut = dist.all_reduce(n, async_op=True).get_future()
    value = fut.wait()
    check("future yields the neuron tensor", value[0].device == dev and value[0].data_ptr() == n.data_ptr())
    same("future value", value[0], c)
    works = [dist.all_gather_into_tensor(torch.empty(world * 4, device=dev), torch.ones(4, device=dev) * rank,
                                         async_op=True) for _ in range(3)]
    for w in works:
        w.wait()
    check("several async collectives in flight", all(w.is_completed() for w in works))
    n = x.to(dev)
    reduced = funcol.all_reduce(n, "sum", dist.group.WORLD)
    same("functional all_reduce", funcol.wait_tensor(reduced), c)

    # barriers and object collectives (the CPU path of the same backend)
    dist.barrier()
    dist.barrier(device_ids=[local])
    check("barriers", True)
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    check("all_gather_object", objs == [{"rank": r} for r in range(world)])

    # subgroups: new_group across the two hosts, and a 2x2 DeviceMesh (split_group: the device is bound)
    evens, odds = dist.new_group([0, 2]), dist.new_group([1, 3])
    mine = evens if rank % 2 == 0 else odds
    n = torch.full((4,), float(rank), device=dev)
    dist.all_reduce(n, group=mine)
    check("new_group all_reduce", n.cpu().tolist() == [float(rank % 2 * 2 + 2)] * 4, str(n.cpu()))
    def mesh_checks(how: str) -> None:
        mesh = init_device_mesh("neuron", (2, 2), mesh_dim_names=("dp", "tp"))
        tp = mesh.get_group("tp")
        check(f"{how} mesh group backend", dist.get_backend(tp) == "neuron", dist.get_backend(tp))
        n = torch.full((3,), float(rank), device=dev)
        dist.all_reduce(n, group=tp)
        first = rank - rank % 2
        check(f"{how} mesh tp all_reduce", n.cpu().tolist() == [float(first + first + 1)] * 3, str(n.cpu()))
        n = torch.full((3,), float(rank), device=dev)
        dist.all_reduce(n, group=mesh.get_group("dp"))
        check(f"{how} mesh dp all_reduce", n.cpu().tolist() == [float(rank % 2 * 2 + 2)] * 3, str(n.cpu()))
        full = torch.arange(16.0).reshape(4, 4)
        d = distribute_tensor(full.to(dev), mesh, [Shard(0), Replicate()])
        check(f"{how} DTensor on the mesh", d.to_local().device == dev and torch.equal(d.full_tensor().cpu(), full))

    mesh_checks("new_group")

    # zero-copy: collectives take no device memory beyond their outputs
    big = torch.ones(4 << 20, device=dev)  # 16 MiB
    out = torch.empty(world * (4 << 20), device=dev)
    torch.neuron.reset_peak_memory_stats(dev)
    before = torch.neuron.memory_allocated(dev)
    dist.all_reduce(big)
    dist.all_gather_into_tensor(out, big)
    dist.reduce_scatter_tensor(big, out)
    check("no device staging", torch.neuron.max_memory_allocated(dev) == before,
          f"{torch.neuron.max_memory_allocated(dev) - before} extra bytes")

    # A world bound to its device (init_process_group(..., device_id=dev) sets exactly this): DeviceMesh
    # and split_group then split the parent backend instead of creating groups from scratch.
    dist.group.WORLD.bound_device_id = dev
    mesh_checks("split_group")
    pair = dist.split_group(split_ranks=[[0, 1], [2, 3]])  # one pair per host
    n = torch.full((2,), float(rank), device=dev)
    dist.all_reduce(n, group=pair)
    check("split_group all_reduce", n.cpu().tolist() == [float(rank // 2 * 4 + 1)] * 2, str(n.cpu()))

    dist.barrier()
    dist.destroy_process_group()
    if failures:
        print(f"[{rank}] FAILED: {failures}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    _worker()
