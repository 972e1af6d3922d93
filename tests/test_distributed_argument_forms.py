"""The argument forms of TorchNeuron's backend that gloo and NCCL do not have, against gloo on CPU tensors.

- `reduce_scatter(output, [input])`: one input tensor holding every rank's part along the scatter dim (the
  one dim where input and output shapes differ, the shorter shape padded with leading 1s), as TorchNeuron's
  ProcessGroupNeuron takes it; the reference is gloo's reduce_scatter of the input's parts.
- `all_gather_coalesced(outputs, inputs)`: TorchNeuron's layout, `outputs[i][rank]` = rank's `inputs[i]`
  (one list per input tensor; gloo's layout is the transpose).
- What TorchNeuron refuses in these forms, with its key phrases (the real suite matches on them).

Two ranks under torchrun (no heavy lock needed), on both data paths: shared memory (one host's default) and
gloo (TORCHNEURON_SHM_COLLECTIVES=0, as between hosts).
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

EXPECTED_CHECKS = 19  # per rank: guards against checks silently not running


@pytest.mark.slow
@pytest.mark.parametrize("shm", ["1", "0"], ids=["shared_memory", "gloo"])
def test_argument_forms_match_gloo(shm):
    from test_distributed_launch import torchrun

    proc = torchrun("test_distributed_argument_forms.py", 2, timeout=240, TORCHNEURON_SHM_COLLECTIVES=shm)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "FAIL" not in out, out
    for rank in range(2):
        n = out.count(f"[{rank}] ok ")
        assert n >= EXPECTED_CHECKS, f"rank {rank} ran only {n} checks:\n{out}"


# ---- the worker: run by torchrun ----------------------------------------------------------------------------

def _worker() -> None:
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("neuron")
    gloo = dist.new_group(backend="gloo")
    failures = []

    def check(name, ok, detail=""):
        print(f"[{rank}] {'ok' if ok else 'FAIL'} {name} {'' if ok else detail}", flush=True)
        if not ok:
            failures.append(name)

    def data(shape, salt):
        return torch.randn(shape, generator=torch.Generator().manual_seed(100 * rank + salt))

    # reduce_scatter of one input: the parts of the input along the scatter dim, reduced; gloo gets the parts
    # (input, output, scatter dim of the input padded to the output's rank)
    forms = [((2, 4, 8, 10), (1, 4, 8, 10), 0), ((2, 4, 8, 10), (2, 4, 4, 10), 2), ((3, 4, 6), (3, 4, 3), 2),
             ((2, 2), (2,), 0), ((2, 8), (8,), 0), ((6,), (1, 3), 1)]
    for salt, (ishape, oshape, dim) in enumerate(forms):
        x = data(ishape, salt)
        padded = x.reshape((1,) * (len(oshape) - len(ishape)) + ishape) if len(oshape) > len(ishape) else x
        parts = [p.contiguous().reshape(oshape) for p in padded.chunk(world, dim)]
        got, want = torch.empty(oshape, device=dev), torch.empty(oshape)
        dist.reduce_scatter(got, [x.to(dev)])
        dist.reduce_scatter(want, parts, group=gloo)
        check(f"reduce_scatter one input {ishape} -> {oshape}", torch.allclose(got.cpu(), want),
              f"{got.cpu()} vs {want}")
    parts = [data((3, 2), 10 + q) for q in range(world)]  # the usual form next to it: one input per rank
    got, want = torch.empty(3, 2, device=dev), torch.empty(3, 2)
    dist.reduce_scatter(got, [p.to(dev) for p in parts])
    dist.reduce_scatter(want, parts, group=gloo)
    check("reduce_scatter one input per rank", torch.allclose(got.cpu(), want), f"{got.cpu()} vs {want}")
    for op in (dist.ReduceOp.AVG, dist.ReduceOp.MIN, dist.ReduceOp.MAX):
        x = data((4, 3), 20)
        got, want = torch.empty(2, 3, device=dev), torch.empty(2, 3)
        dist.reduce_scatter(got, [x.to(dev)], op=op)
        dist.reduce_scatter(want, [p.contiguous() for p in x.chunk(world)], op=op, group=gloo)
        check(f"reduce_scatter one input {op}", torch.allclose(got.cpu(), want), f"{got.cpu()} vs {want}")
    x = data((4,), 21)
    xn = x.to(dev)
    got, want = torch.empty(2, device=dev), torch.empty(2)
    dist.reduce_scatter(got, [xn], op=dist._make_nccl_premul_sum(2.5))
    dist.reduce_scatter(want, [p.contiguous() * 2.5 for p in x.chunk(world)], group=gloo)
    check("reduce_scatter one input PREMUL_SUM", torch.allclose(got.cpu(), want) and torch.equal(xn.cpu(), x))

    # all_gather_coalesced: outputs[i][rank] receives rank's inputs[i]
    ins = [data((2, 2), 30), data((1,), 31), data((3,), 32)]
    outs = [[torch.zeros_like(t, device=dev) for _ in range(world)] for t in ins]
    refs = [[torch.zeros_like(t) for t in ins] for _ in range(world)]  # gloo's layout: refs[rank][i]
    dist.all_gather_coalesced(outs, [t.to(dev) for t in ins])
    dist.all_gather_coalesced(refs, ins, group=gloo)
    check("all_gather_coalesced outputs[i][rank]",
          all(torch.equal(outs[i][q].cpu(), refs[q][i]) for i in range(len(ins)) for q in range(world)))

    def refused(name, call, match):
        import re
        try:
            call()
        except (ValueError, RuntimeError) as e:
            return check(f"refused: {name}", re.search(match, str(e)) is not None, str(e)[:300])
        check(f"refused: {name}", False, "did not raise")

    ones = lambda *s: torch.ones(*s, device=dev)  # noqa: E731
    refused("reduce_scatter of one input of the output's shape", lambda: dist.reduce_scatter(ones(4, 4), [ones(4, 4)]),
            r"when input and output shapes are identical, replica group must have size 1, got 2")
    refused("reduce_scatter of one input differing in two dims", lambda: dist.reduce_scatter(ones(2, 2), [ones(4, 6)]),
            r"single tensor scatter can only differ in one dimension, found differences in: dim\[0\]: 4 -> 2, "
            r"dim\[1\]: 6 -> 2")
    refused("reduce_scatter of one input not world size x the output",
            lambda: dist.reduce_scatter(ones(3), [ones(8)]),
            r"scatter dimension 0: input size \(8\) must be evenly divisible by replica group size \(2\).*"
            r"Expected output size: 4, actual output size: 3")
    refused("all_gather_coalesced in gloo's layout (one list per rank)",
            lambda: dist.all_gather_coalesced([[ones(2), ones(3)] for _ in range(world)],
                                              [ones(2), ones(3), ones(1)]),
            r"number of output lists \(2\) must match number of input tensors \(3\)")
    refused("all_gather_into_tensor of the wrong size",
            lambda: dist.all_gather_into_tensor(ones(15), ones(7)), r"output shape mismatch, expected \[14\], got \[15\]")
    refused("reduce_scatter_tensor of the wrong size", lambda: dist.reduce_scatter_tensor(ones(5), ones(20)),
            r"input size \(20\) must be evenly divisible by replica group size \(2\).*Expected output size: 10, "
            r"actual output size: 5")
    n = ones(3)
    dist.all_reduce(n)
    check("all_reduce after the refusals", n.cpu().tolist() == [2.0] * 3, str(n.cpu()))
    dist.barrier()
    dist.destroy_process_group()
    if failures:
        print(f"[{rank}] FAILED: {failures}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    _worker()
