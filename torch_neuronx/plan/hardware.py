"""What a plan needs to know about an instance: cores and HBM (from the runtime's instance table), the runtime's
reserve, the job's world the platform's collectives accept, and the documented rates behind the step-time model.

Cores, HBM, LNC, the reserve and the collective rule are the runtime's (torch_neuronx.runtime.topology and
torch_neuronx.runtime.collective_groups: one table and one rule for the emulator and the plan). The rates are AWS's
documented numbers, each with its source below (docs/plan.md lists them with the model that uses them):

  NeuronCore engines   NKI architecture guides (nki/guides/architecture/trainium_inferentia2_arch.rst,
                       trainium2_arch.rst, trainium3_arch.rst): TensorE a 128x128 systolic array at 2.8 GHz (v2) /
                       2.4 GHz (v3, v4), two BF16 inputs per PE per cycle (92 / 79 dense BF16 TFLOPS, FP32 a quarter);
                       VectorE and ScalarE data-path widths (elements per cycle) and clocks.
  TensorE sustained    85.2%: AWS's fully optimized NKI matmul on a trn1.32xlarge core ([4096,8192] @
                       [8192,8192] BF16, 6.97 ms, "Hardware FLOPs Utilization 85.24%"; NKI matrix multiplication
                       tutorial, SDK 2.26).
  DMA                  16 DMA engines per NeuronCore: 272 / 368 / 528 GB/s per core (nki-dma-bandwidth-guide.rst).
  HBM                  per chip, the chip pages (trainium*.rst): 820 GiB/s, 2.9 TB/s, 4.9 TB/s.
  NeuronLink           per chip: trn1 384 GB/s ("Inter-chip Interconnect (GB/sec/chip)", trainium2.rst), trn1n 768
                       (trn1-arch.rst), trn2 1,024 (trn2-arch.rst, intra-instance), trn3 2,048 GiB/s (trn3-arch.rst),
                       inf2 192 (trainium-facts).
  EFA                  per instance (trn1-arch.rst, trn2-arch.rst, trn3-arch.rst): trn1.32xlarge 800 Gbps, trn1n
                       1,600, trn2 3,200, a Trn3 Gen1 server 12,800/4, a Gen2 server 28,800/36; each rank gets its
                       instance's EFA over the ranks on it ("each rank gets 3.2 Tbps / 64", neuron-runtime/about/
                       collectives.rst). Inf2 runs no multi-instance collectives (nccom-test.rst).
  collective latency   per hop about 1-2 us inside an instance (intranode-collective-comm.rst), ~15 us between
                       instances (internode-collective-comm.rst).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..runtime.collective_groups import CollectiveTopologyError, check_collective_group
from .config import PlanError

# the module (torch_neuronx.runtime's attribute `topology` is its function of the same name)
_topology = importlib.import_module("torch_neuronx.runtime.topology")

TB = 1000 ** 4
GB = 1000 ** 3
GiB = 1 << 30
Gbps = 1e9 / 8

# What the runtime keeps of each physical core's HBM (microcode, runtime state): the emulator's number.
RUNTIME_RESERVE_PER_PHYSICAL_CORE = _topology.RUNTIME_RESERVE_PER_PHYSICAL_CORE

# The best fraction of TensorE's peak AWS documents for a matmul on NeuronCore-v2 (module doc); assumed for v3/v4
# too (no figure is published for them).
TENSOR_SUSTAINED = 0.852


@dataclass(frozen=True)
class Engines:
    """One physical NeuronCore's engines (rates per second)."""
    version: str
    tensor_bf16_flops: float        # dense BF16/FP16/TF32 peak
    tensor_fp32_flops: float
    vector_elements: float          # VectorE elements per second (FP32 and other non-16-bit types)
    vector_elements_16bit: float    # ... for BF16/FP16 data (wider data path on v3/v4)
    scalar_elements: float
    scalar_elements_16bit: float
    dma_bytes: float                # the core's 16 DMA engines together


def _engines(version, tensor_ghz, vec_ghz, vec_w, vec_w16, sc_ghz, sc_w, sc_w16, dma_gbps_per_engine):
    peak = tensor_ghz * 1e9 * 128 * 128 * 2
    return Engines(version, peak, peak / 4, vec_ghz * 1e9 * vec_w, vec_ghz * 1e9 * vec_w16, sc_ghz * 1e9 * sc_w,
                   sc_ghz * 1e9 * sc_w16, 16 * dma_gbps_per_engine * 1e9)


ENGINES = {
    "v2": _engines("NeuronCore-v2", 2.8, 1.12, 128, 128, 1.4, 128, 128, 17),
    "v3": _engines("NeuronCore-v3", 2.4, 0.96, 256, 512, 1.2, 128, 128, 23),
    "v4": _engines("NeuronCore-v4", 2.4, 1.2, 256, 512, 1.2, 128, 256, 33),
}


@dataclass(frozen=True)
class ChipSpec:
    """Published per-chip numbers: dense BF16 FLOP/s (the MFU denominator AWS uses), HBM bytes/s, interconnect."""
    bf16_flops: float
    hbm_bytes_per_s: float
    link_bytes_per_s: float
    interconnect: str


CHIPS: dict[str, ChipSpec] = {
    "Trainium1": ChipSpec(190e12, 820 * GiB, 384 * GB, "NeuronLink-v2 2D torus"),
    "Trainium2": ChipSpec(667e12, 2.9 * TB, 1024 * GB, "NeuronLink-v3 4x4 2D torus"),
    "Trainium3": ChipSpec(671e12, 4.9 * TB, 2048 * GiB, "NeuronLink-v4 / NeuronSwitch-v1 all-to-all"),
    "Inferentia2": ChipSpec(190e12, 820 * GiB, 192 * GB, "NeuronLink-v2 ring"),
}
INSTANCE_LINK: dict[str, float] = {"trn1n.32xlarge": 768 * GB}
# EFA bandwidth of one instance (bytes/s); absent: the instance takes part in no multi-instance collectives.
INSTANCE_EFA: dict[str, float] = {
    "trn1.2xlarge": 25 * Gbps, "trn1.32xlarge": 800 * Gbps, "trn1n.32xlarge": 1600 * Gbps,
    "trn2.48xlarge": 3200 * Gbps, "trn2u.48xlarge": 3200 * Gbps,
    "trn3-gen1": 12800 / 4 * Gbps, "trn3-gen2": 28800 / 36 * Gbps,
}
HOP_LATENCY_INTRA = 1.5e-6      # "about 1-2 us" per ring hop inside an instance
HOP_LATENCY_INTER = 15e-6       # "~15 us" per hop between instances


@dataclass(frozen=True)
class Machine:
    """NODES instances at one LNC setting, as a plan sees them (per logical core unless named otherwise)."""
    name: str
    chip: str
    chips: int                 # per instance
    lnc: int
    cores: int                 # per instance
    nodes: int
    cores_per_chip: int        # logical
    hbm_per_core: int
    reserve_per_core: int
    engines: Engines           # of one physical core; a logical core has lnc of them
    peak_bf16_flops_per_core: float   # the published chip peak over its logical cores (MFU)
    hbm_bytes_per_s_per_core: float
    link_bytes_per_s_per_chip: float  # 0: one chip per instance
    efa_bytes_per_s: float            # per instance; 0: no multi-instance collectives
    interconnect: str
    notes: tuple[str, ...]

    @property
    def world(self) -> int:
        return self.cores * self.nodes

    @property
    def budget_per_core(self) -> int:
        """HBM a core's tensors can use: its HBM less the runtime's reserve."""
        return self.hbm_per_core - self.reserve_per_core

    # per logical core: lnc physical cores' engines
    @property
    def tensor_flops(self) -> float:
        return self.engines.tensor_bf16_flops * self.lnc

    @property
    def tensor_fp32_flops(self) -> float:
        return self.engines.tensor_fp32_flops * self.lnc

    def vector_rate(self, sixteen_bit: bool) -> float:
        e = self.engines
        return (e.vector_elements_16bit if sixteen_bit else e.vector_elements) * self.lnc

    def scalar_rate(self, sixteen_bit: bool) -> float:
        e = self.engines
        return (e.scalar_elements_16bit if sixteen_bit else e.scalar_elements) * self.lnc

    @property
    def dma_bytes_per_s(self) -> float:
        """What one logical core moves to and from HBM: its DMA engines, at most its share of the chip's HBM."""
        return min(self.engines.dma_bytes * self.lnc, self.hbm_bytes_per_s_per_core)

    def place(self, rank: int) -> tuple[int, int]:
        """(instance, chip within it) of global RANK: ranks fill an instance's cores in order, then the next."""
        return rank // self.cores, (rank % self.cores) // self.cores_per_chip


def known_instances() -> list[str]:
    return sorted(_topology.INSTANCES)


def machine(name: str, lnc: int | None = None, nodes: int = 1) -> Machine:
    """NODES instances NAME at LNC (default: the platform's default, 2 on Trainium2/3, else 1)."""
    inst = _topology.instance_type(name, PlanError, "instance")
    if lnc is None:
        lnc = inst.default_lnc
    if lnc not in inst.lnc_choices:
        raise PlanError(f"LNC {lnc} is not available on {name} ({inst.chip}): "
                        + (f"use {' or '.join(map(str, inst.lnc_choices))}" if len(inst.lnc_choices) > 1
                           else f"it has LNC {inst.lnc_choices[0]} only"))
    if nodes < 1:
        raise PlanError("--nodes must be positive")
    efa = INSTANCE_EFA.get(name, 0.0)
    if nodes > 1 and not efa:
        raise PlanError(f"{name} ({inst.chip}) runs no collectives across instances (Neuron's multi-instance "
                        f"collectives need EFA: Trainium instances); plan one instance (--nodes 1) or use "
                        f"{', '.join(n for n in sorted(INSTANCE_EFA) if n.startswith('trn'))}")
    spec = CHIPS.get(inst.chip)
    if spec is None:
        raise PlanError(f"no published rates for {inst.chip} ({name}) in torch_neuronx/plan/hardware.py")
    share = lnc / inst.cores_per_chip          # one logical core's share of its chip
    link = INSTANCE_LINK.get(name, spec.link_bytes_per_s) if inst.chips > 1 else 0.0
    notes = []
    if inst.core_version != "v2":
        notes.append(f"TensorE sustained {TENSOR_SUSTAINED:.1%} of peak: AWS's figure for NeuronCore-v2, assumed for "
                     f"NeuronCore-{inst.core_version}")
    return Machine(name=name, chip=inst.chip, chips=inst.chips, lnc=lnc, cores=inst.cores(lnc), nodes=nodes,
                   cores_per_chip=inst.cores_per_chip // lnc,
                   hbm_per_core=inst.hbm_per_chip * lnc // inst.cores_per_chip,
                   reserve_per_core=RUNTIME_RESERVE_PER_PHYSICAL_CORE * lnc, engines=ENGINES[inst.core_version],
                   peak_bf16_flops_per_core=spec.bf16_flops * share,
                   hbm_bytes_per_s_per_core=spec.hbm_bytes_per_s * share,
                   link_bytes_per_s_per_chip=link, efa_bytes_per_s=efa, interconnect=spec.interconnect,
                   notes=tuple(notes))


def check_layout(m: Machine, tp: int, fsdp: int) -> None:
    """Raise PlanError if the platform's collectives cannot run the layout: the rule constrains the cores the job's
    collectives span (its world), not each TP or FSDP group (runtime/collective_groups.py)."""
    try:
        check_collective_group(tp * fsdp, None, m.name)
    except CollectiveTopologyError as e:
        raise PlanError(f"TP={tp} x FSDP={fsdp} ({tp * fsdp} cores): {e}") from None
