"""An ESTIMATE of a training step's time on Trainium, from the traced step: each op on the engine that runs it at
AWS's documented rates, fused as a graph compiler fuses it (fusion.py), attention as the flash kernel
(flash_attention.py), each collective on the links its group spans (interconnect.py), overlapped as FSDP2 and
tensor parallelism allow. Not a measurement: the band printed next to it is how far such estimates were from AWS's
published measurements (published.py), and the assumptions are returned with the numbers.

The timeline of one micro-batch on rank 0's core, per phase (forward, backward):

  compute      the fused regions, matmuls and attention calls in order (each the busiest of its engines).
  blocking     tensor-parallel collectives (functional collectives: DTensor, Transformers' TP hooks): the next op
               needs their result, so they add to the critical path ("TP CC operations directly block subsequent
               computation", neuron-runtime/explore/compute-comm-overlap.rst).
  overlapped   FSDP2's all-gathers and reduce-scatters run on their own stream (Trainium: dedicated collective
               cores, in parallel with the compute engines): each layer's all-gather during the previous layer's
               compute (FSDP2's prefetch), each reduce-scatter during the next layer's backward. Exposed: the first
               all-gather of the forward and the last reduce-scatter of the backward (nothing to hide behind), and
               whatever the phase's FSDP traffic exceeds its compute by.

A step of G sequences (the global batch) on F FSDP ranks of micro-batch B takes A = G / (B F) micro-batches
(gradient accumulation: FSDP2 all-gathers and reduce-scatters in each) and one optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import fusion
from .cost import BACKWARD, FORWARD, OPTIMIZER, StepCost
from .hardware import TENSOR_SUSTAINED, Machine
from .step import StepSpec

ASSUMPTIONS = (
    f"TensorE at {TENSOR_SUSTAINED:.1%} of its peak (AWS's best documented NKI matmul on Trainium1), FP32 matmuls at a "
    "quarter; VectorE/ScalarE at their documented element rates; DMA at the core's 16 DMA engines' rate",
    "element-wise, normalisation, softmax and loss work fused between matmuls (HBM traffic only at the fusion "
    "boundaries, a matmul's output consumed only by the next region stays on chip); engines overlap within a "
    "region, regions run one after another",
    "attention as the flash kernel: causal tiles skipped, backward recomputes the scores, softmax work on "
    "ScalarE/VectorE; no S x S matrix in HBM",
    "collectives: Neuron's hierarchical algorithms on the links each group spans (EFA between instances, each rank "
    "with its instance's EFA over its ranks; NeuronLink between chips; HBM on one chip) plus per-hop latency",
    "tensor-parallel collectives on the critical path; FSDP2 collectives overlapped with the adjacent layer's "
    "compute (exposed: the first all-gather, the last reduce-scatter, any excess over compute)",
)


@dataclass
class StepTime:
    step_seconds: float
    compute_seconds: float            # the compute engines' critical path, over the whole step
    collective_seconds: float         # every collective's time (exposed or hidden)
    exposed_collective_seconds: float  # what collectives add to the step
    micro_batch_seconds: float
    optimizer_seconds: float
    accumulation: int                 # micro-batches per step (gradient accumulation)
    tokens_per_step: int              # over the whole job
    tokens_per_second: float
    tokens_per_second_per_chip: float
    mfu: float                        # model FLOPs (3x forward) over step time x the published peak of every core
    hfu: float                        # every FLOP the step runs (recompute included) over the same
    breakdown: dict[str, float]       # seconds per micro-batch (see BREAKDOWN)
    collectives: list[dict]           # per micro-batch and optimizer step: kind, group, link, count, bytes, seconds
    hbm_bytes: float                  # per micro-batch per core, after fusion
    hbm_bytes_unfused: float          # ... every op's inputs and outputs
    band: tuple[float, float] | None  # estimated / published tokens/s on AWS's published runs (published.py)
    band_source: str
    assumptions: tuple[str, ...]
    label: str = "estimate"
    notes: list[str] = field(default_factory=list)


BREAKDOWN = {
    "tensor_engine": "TensorE busy (matmuls, attention)",
    "vector_engine": "VectorE busy",
    "scalar_engine": "ScalarE busy",
    "hbm": "DMA busy (HBM traffic after fusion)",
    "compute": "compute critical path",
    "tp_collectives": "blocking collectives (TP), exposed",
    "fsdp_collectives": "FSDP collectives, total",
    "fsdp_overlapped": "FSDP collectives hidden behind compute",
    "fsdp_exposed": "FSDP collectives exposed",
}


@dataclass
class _Sums:
    """Additive quantities of one stream's timeline (so two streams combine linearly)."""
    compute: dict = field(default_factory=lambda: {FORWARD: 0.0, BACKWARD: 0.0, OPTIMIZER: 0.0})
    blocking: dict = field(default_factory=lambda: {FORWARD: 0.0, BACKWARD: 0.0, OPTIMIZER: 0.0})
    fsdp: dict = field(default_factory=lambda: {FORWARD: 0.0, BACKWARD: 0.0, OPTIMIZER: 0.0})
    edge: dict = field(default_factory=lambda: {FORWARD: 0.0, BACKWARD: 0.0, OPTIMIZER: 0.0})
    busy: dict = field(default_factory=lambda: dict.fromkeys(("tensor", "vector", "scalar", "dma"), 0.0))
    hbm: float = 0.0
    collectives: dict = field(default_factory=dict)   # (kind, group size, link, blocking) -> [count, bytes, seconds]

    def add(self, other: "_Sums", w: float) -> None:
        for name in ("compute", "blocking", "fsdp", "edge", "busy"):
            mine, theirs = getattr(self, name), getattr(other, name)
            for k in mine:
                mine[k] += w * theirs[k]
        self.hbm += w * other.hbm
        for key, vals in other.collectives.items():
            mine = self.collectives.setdefault(key, [0.0, 0.0, 0.0])
            for i, v in enumerate(vals):
                mine[i] += w * v


def _sums(items: list[fusion.Item]) -> _Sums:
    out = _Sums()
    compute_idx = [i for i, it in enumerate(items) if it.what in ("matmul", "attention")]
    first_fwd = next((i for i in compute_idx if items[i].phase == FORWARD), len(items))
    last_bwd = max((i for i in compute_idx if items[i].phase == BACKWARD), default=-1)
    for i, it in enumerate(items):
        if it.stream == fusion.COMPUTE:
            out.compute[it.phase] += it.seconds
            if it.phase != OPTIMIZER:   # the breakdown is of a micro-batch
                out.busy["tensor"] += it.tensor
                out.busy["vector"] += it.vector
                out.busy["scalar"] += it.scalar
                out.busy["dma"] += it.dma
                out.hbm += it.hbm_bytes
            continue
        c = it.collective
        entry = out.collectives.setdefault((c.kind, c.group_size, it.link, c.blocking), [0.0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += c.bytes
        entry[2] += it.seconds
        if it.stream == fusion.BLOCKING:
            out.blocking[it.phase] += it.seconds
        else:
            edge = (it.phase == FORWARD and i < first_fwd) or (it.phase == BACKWARD and i > last_bwd)
            (out.edge if edge else out.fsdp)[it.phase] += it.seconds
    return out


def estimate(cost: StepCost, m: Machine, spec: StepSpec, band: tuple[float, float] | None = None,
             band_source: str = "") -> StepTime:
    total = _Sums()
    for ops, weight in cost.streams:
        total.add(_sums(fusion.schedule(ops, m)), weight)
    micro = 0.0
    fsdp_all = fsdp_exposed = 0.0
    for phase in (FORWARD, BACKWARD):
        hidden_behind = total.compute[phase]
        exposed = total.edge[phase] + max(0.0, total.fsdp[phase] - hidden_behind)
        micro += total.compute[phase] + total.blocking[phase] + exposed
        fsdp_all += total.edge[phase] + total.fsdp[phase]
        fsdp_exposed += exposed
    optimizer = total.compute[OPTIMIZER] + total.blocking[OPTIMIZER] + total.edge[OPTIMIZER] + total.fsdp[OPTIMIZER]
    accumulation = spec.accumulation
    step = accumulation * micro + optimizer
    compute = accumulation * (total.compute[FORWARD] + total.compute[BACKWARD]) + total.compute[OPTIMIZER]
    blocking = total.blocking[FORWARD] + total.blocking[BACKWARD]
    tokens = spec.batch * spec.seq * spec.fsdp * accumulation   # each FSDP rank sees its own batch; TP ranks share it
    peak = m.peak_bf16_flops_per_core
    chips = spec.world / m.cores_per_chip
    breakdown = {"tensor_engine": total.busy["tensor"], "vector_engine": total.busy["vector"],
                 "scalar_engine": total.busy["scalar"], "hbm": total.busy["dma"],
                 "compute": total.compute[FORWARD] + total.compute[BACKWARD], "tp_collectives": blocking,
                 "fsdp_collectives": fsdp_all, "fsdp_overlapped": fsdp_all - fsdp_exposed,
                 "fsdp_exposed": fsdp_exposed}
    return StepTime(
        step_seconds=step, compute_seconds=compute,
        collective_seconds=accumulation * (blocking + fsdp_all) + total.blocking[OPTIMIZER],
        exposed_collective_seconds=accumulation * (blocking + fsdp_exposed) + total.blocking[OPTIMIZER],
        micro_batch_seconds=micro, optimizer_seconds=optimizer, accumulation=accumulation, tokens_per_step=tokens,
        tokens_per_second=tokens / step if step else 0.0,
        tokens_per_second_per_chip=tokens / step / chips if step else 0.0,
        mfu=3 * cost.forward_flops * accumulation / (step * peak) if step else 0.0,
        hfu=cost.flops * accumulation / (step * peak) if step else 0.0,
        breakdown=breakdown, collectives=[
            dict(kind=k, group=g, link=link, overlapped=not blocking, count=round(n), bytes=b, seconds=t)
            for (k, g, link, blocking), (n, b, t) in sorted(total.collectives.items(), key=lambda kv: -kv[1][2])],
        hbm_bytes=total.hbm, hbm_bytes_unfused=cost.hbm_bytes, band=band,
        band_source=band_source, assumptions=ASSUMPTIONS + m.notes)
