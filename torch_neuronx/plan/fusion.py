"""The traced op stream as a graph compiler runs it on one NeuronCore: fused regions, the HBM traffic left at their
boundaries, and each region's time on the engines.

neuronx-cc compiles the step's graph: element-wise, normalisation, softmax and loss work between two matmuls runs
as one fused region whose intermediates stay in the on-chip SBUF (24-32 MiB), and a matmul's output can leave
TensorE's PSUM straight into the element-wise work that consumes it (ScalarE and VectorE read PSUM). So:

  region          a maximal run of element-wise / data-movement ops of one phase between two anchors (a matmul, the
                  attention kernel, a collective). HBM traffic: each buffer it reads that was made outside it (once),
                  each buffer it makes that is used after it or updated in place (once); the rest stays on chip.
  epilogue        a region that is the only consumer of the preceding matmul's output takes it from PSUM: neither
                  the matmul's write nor the region's read goes to HBM.
  engine time     the engines run in parallel within a region (the compiler schedules them together): its time is
                  the busiest one: VectorE and ScalarE element-passes at their documented rates (one-input
                  arithmetic on whichever is less busy), DMA bytes at the core's DMA rate. Regions follow one
                  another (a region needs its inputs): the step's compute time is their sum.
  matmul          TensorE at its sustained rate (hardware.TENSOR_SUSTAINED; FP32 operands a quarter), its output
                  read out of PSUM by VectorE/ScalarE, its operands moved by DMA: the busiest of the three.
  attention       the flash kernel (flash_attention.py): the busiest of TensorE, ScalarE, VectorE and DMA.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import interconnect
from .cost import Op
from .hardware import TENSOR_SUSTAINED, Machine

COMPUTE, BLOCKING, OVERLAPPED = "compute", "blocking", "overlapped"


@dataclass(slots=True)
class Item:
    """One unit of the core's timeline: a fused region, a matmul, an attention call or a collective."""
    what: str                  # "region" / "matmul" / "attention" / "collective"
    phase: str
    stream: str                # COMPUTE, BLOCKING (a collective the next op waits for) or OVERLAPPED (FSDP2's)
    seconds: float = 0.0
    tensor: float = 0.0        # busy time of each engine
    vector: float = 0.0
    scalar: float = 0.0
    dma: float = 0.0
    hbm_bytes: float = 0.0
    link: str = ""             # collectives: EFA / NeuronLink / on-chip
    collective: object = None  # collectives: the cost.Collective


def _balanced(v: float, s: float, ev: float, es: float) -> tuple[float, float]:
    """VectorE and ScalarE busy times when work taking EV seconds on VectorE or ES on ScalarE is split between them
    to finish first (on top of V and S already given to each)."""
    if ev <= 0 or es <= 0:
        return v, s
    t = max(v, s, (v * es + s * ev + ev * es) / (ev + es))
    f = min(1.0, max(0.0, (t - v) / ev))           # the share VectorE takes
    return v + f * ev, s + (1 - f) * es


def schedule(ops: list[Op], m: Machine) -> list[Item]:
    """The timeline items of one traced op stream on machine M (see module doc)."""
    last_use: dict[int, int] = {}
    for i, op in enumerate(ops):
        for b, _ in op.reads:
            last_use[b] = i
    items: list[Item] = []
    prev_matmul: tuple[Item, Op, int] | None = None
    i, n = 0, len(ops)
    while i < n:
        op = ops[i]
        if op.kind in ("vector", "move"):
            j = i
            while j < n and ops[j].kind in ("vector", "move") and ops[j].phase == op.phase:
                j += 1
            items.append(_region(ops, i, j - 1, last_use, prev_matmul, m))
            prev_matmul = None
            i = j
            continue
        if op.kind == "collective":
            c = op.collective
            items.append(Item("collective", op.phase, BLOCKING if c.blocking else OVERLAPPED,
                              seconds=interconnect.seconds(c, m), link=interconnect.link_of(c, m), collective=c))
            prev_matmul = None
        elif op.kind == "matmul":
            item = _matmul(op, m)
            items.append(item)
            prev_matmul = (item, op, i)
        else:  # attention
            items.append(_attention(op, m))
            prev_matmul = None
        i += 1
    return items


def _io_bytes(op: Op) -> float:
    return sum(nb for _, nb in op.reads) + sum(nb for _, nb in op.writes)


def _matmul(op: Op, m: Machine) -> Item:
    rate = (m.tensor_fp32_flops if op.fp32 else m.tensor_flops) * TENSOR_SUSTAINED
    item = Item("matmul", op.phase, COMPUTE, tensor=op.flops / rate,
                vector=op.out_elements / (m.vector_rate(False) + m.scalar_rate(False)), hbm_bytes=_io_bytes(op))
    item.dma = item.hbm_bytes / m.dma_bytes_per_s
    item.seconds = max(item.tensor, item.vector, item.dma)
    return item


def _attention(op: Op, m: Machine) -> Item:
    call = op.attention
    item = Item("attention", op.phase, COMPUTE, tensor=op.flops / (m.tensor_flops * TENSOR_SUSTAINED),
                vector=call.scores * call.vector_passes / m.vector_rate(False),
                scalar=call.scores * call.scalar_passes / m.scalar_rate(False), hbm_bytes=_io_bytes(op))
    item.dma = item.hbm_bytes / m.dma_bytes_per_s
    item.seconds = max(item.tensor, item.vector, item.scalar, item.dma)
    return item


def _region(ops: list[Op], start: int, end: int, last_use: dict[int, int], prev_matmul, m: Machine) -> Item:
    made: set[int] = set()
    reads: dict[int, int] = {}
    writes: dict[int, int] = {}
    v = s = ev = es = 0.0
    for op in ops[start:end + 1]:
        for b, nb in op.reads:
            if b not in made:
                reads[b] = max(reads.get(b, 0), nb)
        for b, nb in op.writes:
            made.add(b)
            if last_use.get(b, end + 1) > end or b in reads:   # used later, never read (kept), or updated in place
                writes[b] = max(writes.get(b, 0), nb)
        if op.kind == "vector":
            rv, rs = m.vector_rate(op.sixteen_bit), m.scalar_rate(op.sixteen_bit)
            v += op.vector / rv
            s += op.scalar / rs
            ev += op.either / rv
            es += op.either / rs
    if prev_matmul is not None:   # epilogue: the matmul's output read straight from PSUM when only this region uses it
        mm_item, mm_op, _ = prev_matmul
        for b, nb in mm_op.writes:
            if b in reads and last_use.get(b, -1) <= end:
                del reads[b]
                mm_item.hbm_bytes -= nb
                mm_item.dma = mm_item.hbm_bytes / m.dma_bytes_per_s
                mm_item.seconds = max(mm_item.tensor, mm_item.vector, mm_item.dma)
    v, s = _balanced(v, s, ev, es)
    item = Item("region", ops[start].phase, COMPUTE, vector=v, scalar=s,
                hbm_bytes=float(sum(reads.values()) + sum(writes.values())))
    item.dma = item.hbm_bytes / m.dma_bytes_per_s
    item.seconds = max(item.vector, item.scalar, item.dma)
    return item
