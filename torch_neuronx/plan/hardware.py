"""What a plan needs to know about an instance: cores and HBM (from the runtime's instance table), the runtime's
reserve, the collective groups the platform accepts, and the published peaks behind the step-time estimate.

Cores, HBM, LNC, the reserve and the collective group rules are the runtime's (torch_neuronx.runtime.topology and
torch_neuronx.runtime.collective_groups: one table and one rule for the emulator and the plan). The performance
numbers are per chip, from AWS's Trainium/Inferentia architecture pages as collected in
/work/shared/trainium-facts.md ("Hardware" table); a core's share is the chip's number times the physical cores
it spans (LNC) over the chip's physical cores.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..runtime.collective_groups import CollectiveTopologyError, check_collective_group, valid_collective_group_sizes
from .config import PlanError

# the module (torch_neuronx.runtime's attribute `topology` is its function of the same name)
_topology = importlib.import_module("torch_neuronx.runtime.topology")

TB = 1000 ** 4
GiB = 1 << 30

# What the runtime keeps of each physical core's HBM (microcode, runtime state): the emulator's number.
RUNTIME_RESERVE_PER_PHYSICAL_CORE = _topology.RUNTIME_RESERVE_PER_PHYSICAL_CORE


@dataclass(frozen=True)
class ChipPeaks:
    """Published per-chip peaks: dense BF16 FLOP/s, HBM bytes/s, interconnect bytes/s (0: single-chip only)."""
    bf16_flops: float
    hbm_bytes_per_s: float
    interconnect_bytes_per_s: float
    interconnect: str


# Per chip, trainium-facts.md "Hardware" table (AWS docs, Neuron 2.32 architecture pages).
CHIP_PEAKS: dict[str, ChipPeaks] = {
    "Trainium1": ChipPeaks(190e12, 820 * GiB, 384 * GiB, "NeuronLink-v2 2D torus"),
    "Trainium2": ChipPeaks(667e12, 2.9 * TB, 1024e9, "NeuronLink-v3 4x4 2D torus"),
    "Trainium3": ChipPeaks(671e12, 4.9 * TB, 1024e9, "NeuronSwitch-v1 all-to-all"),
    "Inferentia2": ChipPeaks(190e12, 820 * GiB, 192 * GiB, "NeuronLink-v2 ring"),
}
# trn1n doubles trn1's NeuronLink bandwidth (768 GiB/s per chip). Trainium3's per-chip link bandwidth is not in
# the facts file: Trainium2's is used and the estimate says so.
INSTANCE_INTERCONNECT: dict[str, float] = {"trn1n.32xlarge": 768 * GiB}
UNPUBLISHED_INTERCONNECT = {"Trainium3"}


@dataclass(frozen=True)
class Machine:
    """One instance at one LNC setting, as a plan sees it (per logical core unless named otherwise)."""
    name: str
    chip: str
    chips: int
    lnc: int
    cores: int
    cores_per_chip: int
    hbm_per_core: int
    reserve_per_core: int
    bf16_flops_per_core: float
    hbm_bytes_per_s_per_core: float
    link_bytes_per_s_per_core: float   # a core's share of its chip's interconnect bandwidth
    interconnect: str
    notes: tuple[str, ...]

    @property
    def budget_per_core(self) -> int:
        """HBM a core's tensors can use: its HBM less the runtime's reserve."""
        return self.hbm_per_core - self.reserve_per_core


def known_instances() -> list[str]:
    return sorted(_topology.INSTANCES)


def machine(name: str, lnc: int | None = None) -> Machine:
    """The instance NAME at LNC (default: the platform's default, 2 on Trainium2/3, else 1)."""
    inst = _topology.instance_type(name, PlanError, "instance")
    if lnc is None:
        lnc = inst.default_lnc
    if lnc not in inst.lnc_choices:
        raise PlanError(f"LNC {lnc} is not available on {name} ({inst.chip}): "
                        + (f"use {' or '.join(map(str, inst.lnc_choices))}" if len(inst.lnc_choices) > 1
                           else f"it has LNC {inst.lnc_choices[0]} only"))
    peaks = CHIP_PEAKS.get(inst.chip)
    if peaks is None:
        raise PlanError(f"no published peaks for {inst.chip} ({name}) in torch_neuronx/plan/hardware.py")
    share = lnc / inst.cores_per_chip          # one logical core's share of its chip
    link = INSTANCE_INTERCONNECT.get(name, peaks.interconnect_bytes_per_s) if inst.chips > 1 else 0.0
    notes = []
    if inst.chip in UNPUBLISHED_INTERCONNECT:
        notes.append(f"{inst.chip} interconnect bandwidth per chip not published in our facts: Trainium2's used")
    # At LNC=1 on Trainium2/3 two cores share one bank; a plan's ranks are symmetric, so each gets half of it.
    return Machine(name=name, chip=inst.chip, chips=inst.chips, lnc=lnc, cores=inst.cores(lnc),
                   cores_per_chip=inst.cores_per_chip // lnc, hbm_per_core=inst.hbm_per_chip * lnc // inst.cores_per_chip,
                   reserve_per_core=RUNTIME_RESERVE_PER_PHYSICAL_CORE * lnc,
                   bf16_flops_per_core=peaks.bf16_flops * share, hbm_bytes_per_s_per_core=peaks.hbm_bytes_per_s * share,
                   link_bytes_per_s_per_core=link * share, interconnect=peaks.interconnect, notes=tuple(notes))


def valid_group_sizes(m: Machine) -> list[int]:
    """Collective group sizes the platform accepts on this instance, among 1..cores (the runtime's rule:
    torch_neuronx/runtime/collective_groups.py)."""
    return valid_collective_group_sizes(m.name, up_to=m.cores)


def layout_groups(tp: int, fsdp: int) -> dict[str, list[int]]:
    """Rank 0's TP and FSDP groups in Transformers' (pp, dp_replicate, fsdp, tp) mesh: TP is the innermost
    dimension, so a TP group is TP consecutive ranks and an FSDP group strides by TP."""
    return {"TP": list(range(tp)), "FSDP": list(range(0, tp * fsdp, tp))}


def check_layout_groups(m: Machine, tp: int, fsdp: int) -> None:
    """Raise PlanError if the platform's collectives cannot run the layout's TP or FSDP groups (the check the
    neuron c10d backend makes when the job creates them)."""
    for what, ranks in layout_groups(tp, fsdp).items():
        try:
            check_collective_group(len(ranks), ranks, m.name)
        except CollectiveTopologyError as e:
            raise PlanError(f"the {what} group of TP={tp} x FSDP={fsdp}: {e}") from None
