"""An ESTIMATE of step time and tokens/s from a traced step's FLOPs, bytes and collectives against the instance's
published peaks. Not a measurement: the assumptions are returned with the numbers and printed with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .cost import StepCost
from .hardware import Machine
from .step import StepSpec

# FP32 matmuls run at a quarter of the BF16 rate on NeuronCore-v2/v3 (Trainium1: 47.5 vs 190 TFLOPS per chip).
FP32_SLOWDOWN = 4.0

ASSUMPTIONS = (
    "every op at the roofline of one core: max(FLOPs / peak BF16 FLOP/s, bytes in+out / HBM bandwidth); "
    "fp32 matmuls at 1/4 of the BF16 peak; no kernel launch or compiler overhead, no fusion",
    "collectives as rings at the interconnect bandwidth a core gets (its chip's NeuronLink bandwidth over the chip's "
    "cores) when the group spans chips, at the core's HBM bandwidth when it stays on one chip; "
    "all-reduce moves 2(g-1)/g of the payload, all-gather / reduce-scatter / all-to-all (g-1)/g",
    "step time = compute + collectives (no overlap: an upper bound; FSDP2 prefetch overlaps part of it, and "
    "'overlapped' is the lower bound max(compute, collectives))",
    "peaks are published per-chip numbers (docs: trainium-facts.md), split evenly over the chip's cores",
)


@dataclass
class StepTime:
    compute_seconds: float
    collective_seconds: float
    step_seconds: float            # compute + collectives
    overlapped_seconds: float      # max(compute, collectives)
    tokens_per_step: int           # over the whole job
    tokens_per_second: float
    mfu: float                     # model FLOPs over (step time x peak of every core in the job)
    assumptions: tuple[str, ...]


def _ring_factor(kind: str, g: int) -> float:
    return 2 * (g - 1) / g if kind == "all_reduce" else (g - 1) / g if kind != "broadcast" else 1.0


def collective_seconds(cost: StepCost, m: Machine) -> float:
    total = 0.0
    for c in cost.collectives.values():
        chips = {r // m.cores_per_chip for r in c.ranks}
        bw = m.link_bytes_per_s_per_core if len(chips) > 1 else m.hbm_bytes_per_s_per_core
        total += _ring_factor(c.kind, c.group_size) * c.bytes / bw
    return total


def estimate(cost: StepCost, m: Machine, spec: StepSpec) -> StepTime:
    compute = 0.0
    for flops, moved, fp32, weight in cost.ops:
        rate = m.bf16_flops_per_core / (FP32_SLOWDOWN if fp32 else 1.0)
        compute += weight * max(flops / rate, moved / m.hbm_bytes_per_s_per_core)
    comm = collective_seconds(cost, m)
    step = compute + comm
    tokens = spec.batch * spec.seq * spec.fsdp   # each FSDP rank sees its own batch; a TP group shares one
    mfu = cost.flops * spec.world / (step * m.bf16_flops_per_core * spec.world) if step else 0.0
    return StepTime(compute_seconds=compute, collective_seconds=comm, step_seconds=step,
                    overlapped_seconds=max(compute, comm), tokens_per_step=tokens,
                    tokens_per_second=tokens / step if step else 0.0, mfu=mfu,
                    assumptions=ASSUMPTIONS + m.notes)
