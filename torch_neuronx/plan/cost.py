"""What a traced step costs one core: FLOPs, HBM bytes moved, and the collectives it takes part in.

A TorchDispatchMode under the fake tensors: it sees every ATen op of rank 0 on its local shards (DTensor ops are
left to DTensor, which desugars them into local ops this mode then sees). FLOPs come from PyTorch's own formulas
(torch.utils.flop_counter.flop_registry: matmuls, attention, convolutions); bytes are each op's tensor inputs
plus outputs (an op streams its operands through HBM once; views move nothing); collectives are recorded with
their payload and group size for the interconnect model in estimate.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

_COLLECTIVE_KINDS = {
    # c10d ops (FSDP2, dist.* calls) and functional collectives (DTensor redistribution, TP hooks)
    "allgather": "all_gather", "_allgather_base": "all_gather", "allgather_into_tensor_coalesced": "all_gather",
    "all_gather_into_tensor": "all_gather", "all_gather_into_tensor_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "reducescatter_coalesced": "reduce_scatter",
    "allreduce": "all_reduce", "all_reduce": "all_reduce", "allreduce_coalesced": "all_reduce",
    "all_reduce_coalesced": "all_reduce",
    "alltoall": "all_to_all", "alltoall_base": "all_to_all", "all_to_all_single": "all_to_all",
    "broadcast": "broadcast",
}


@dataclass
class Collective:
    kind: str          # all_gather / reduce_scatter / all_reduce / all_to_all / broadcast
    group_size: int
    ranks: tuple[int, ...]  # rank 0's group (which cores, so which chips, the collective spans)
    bytes: int         # the full payload (the gathered output, the reduce-scatter input, the all-reduced tensor)
    count: int = 1


@dataclass
class StepCost:
    flops: float = 0.0
    hbm_bytes: float = 0.0
    # per op: (FLOPs, bytes moved, computes in fp32, weight): estimate.py sums weight x each op's roofline time at
    # the core's peaks (the weight is 1 for a traced op; extrapolated() weighs two traces)
    ops: list[tuple[float, float, bool, float]] = field(default_factory=list)
    collectives: dict[tuple[str, tuple[int, ...]], Collective] = field(default_factory=dict)

    @staticmethod
    def extrapolated(a: "StepCost", b: "StepCost", k: float) -> "StepCost":
        """a + k (b - a): the cost of a model whose layer count lies k of the way from a's to b's and beyond
        (each added decoder layer costs what b's extra layers cost)."""
        out = StepCost(a.flops + k * (b.flops - a.flops), a.hbm_bytes + k * (b.hbm_bytes - a.hbm_bytes))
        out.ops = [(f, m, w, x * (1 - k)) for f, m, w, x in a.ops] + [(f, m, w, x * k) for f, m, w, x in b.ops]
        for key in set(a.collectives) | set(b.collectives):
            ca, cb = a.collectives.get(key), b.collectives.get(key)
            ref = ca or cb
            bytes_ = (ca.bytes if ca else 0) * (1 - k) + (cb.bytes if cb else 0) * k
            count = (ca.count if ca else 0) * (1 - k) + (cb.count if cb else 0) * k
            out.collectives[key] = Collective(ref.kind, ref.group_size, ref.ranks, max(0, round(bytes_)),
                                              max(0, round(count)))
        return out


def _group_ranks(args) -> tuple[int, ...]:
    """The global ranks of the process group a collective's arguments name (a ProcessGroup or a group name)."""
    import torch.distributed as dist
    for a in args:
        pg = None
        if isinstance(a, dist.ProcessGroup):
            pg = a
        elif isinstance(a, torch.ScriptObject):
            try:
                pg = dist.ProcessGroup.unbox(a)  # c10d ops take the group boxed
            except (RuntimeError, TypeError):
                continue
        elif isinstance(a, str):
            try:
                pg = dist.distributed_c10d._resolve_process_group(a)  # functional collectives take its name
            except (ValueError, RuntimeError, KeyError):
                continue
        if pg is not None:
            return tuple(dist.get_process_group_ranks(pg))
    return (0,)


def _nbytes(t) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


class CostCounter(TorchDispatchMode):
    """Counts FLOPs, bytes and collectives of the local ops run under it (see module doc)."""

    def __init__(self):
        super().__init__()
        self.cost = StepCost()
        self._fake_mode_on_entry = None

    def __enter__(self):
        from torch._guards import active_fake_mode
        self._fake_mode_on_entry = active_fake_mode()
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from torch.distributed.tensor import DTensor
        if any(t is DTensor for t in types):
            return NotImplemented  # let DTensor run its local ops through this mode
        from torch._guards import active_fake_mode
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if active_fake_mode() is not self._fake_mode_on_entry:
            return out  # DTensor's sharding propagation runs ops on its own fake tensors: not the step's work
        ns = func.namespace
        name = func._opname
        if ns in ("c10d", "_c10d_functional") and name.rstrip("_") in _COLLECTIVE_KINDS:
            kind = _COLLECTIVE_KINDS[name.rstrip("_")]
            ranks = _group_ranks(tree_flatten((args, kwargs))[0])
            tensors = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
            payload = max((_nbytes(t) for t in tensors), default=0)
            if kind == "all_gather" and ns == "c10d":
                payload = max(payload, sum(_nbytes(t) for t in tree_flatten(args[0])[0]))
            self._collective(kind, ranks, payload)
            return out
        if func.is_view or ns in ("c10d", "_c10d_functional"):
            return out
        flops = 0
        packet = func._overloadpacket
        if packet in flop_registry:
            flops = flop_registry[packet](*args, **kwargs, out_val=out)
        tensors = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
        moved = sum(_nbytes(t) for t in tensors)
        fp32 = bool(flops) and any(t.dtype == torch.float32 for t in tensors)
        self.cost.flops += flops
        self.cost.hbm_bytes += moved
        self.cost.ops.append((float(flops), float(moved), fp32, 1.0))
        return out

    def _collective(self, kind: str, ranks: tuple[int, ...], payload: int) -> None:
        if len(ranks) <= 1:
            return
        key = (kind, ranks)
        c = self.cost.collectives.get(key)
        if c is None:
            self.cost.collectives[key] = Collective(kind, len(ranks), ranks, payload)
        else:
            c.bytes += payload
            c.count += 1
