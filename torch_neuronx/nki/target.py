"""The NeuronCore a kernel is built for: on-chip memories, tile limits and engine rates per generation.

Which generation: `NEURON_PLATFORM_TARGET_OVERRIDE` (as AWS's NKI reads it: trn1|inf2|gen2, trn2|gen3,
trn3|gen4) wins; otherwise the emulated instance's chip (TORCHNEURON_INSTANCE, torch_neuronx.runtime.topology):
Trainium1 / Inferentia2 -> NeuronCore-v2, Trainium2 -> v3, Trainium3 -> v4.

Every number below is AWS's documented one (aws-neuron-sdk, NKI 0.6):
  - SBUF: 128 partitions of 192 KiB (v2), 224 KiB (v3), 256 KiB (v4); PSUM: 128 partitions of 16 KiB,
    8 banks of 2 KiB each (nki/guides/architecture/trainium_inferentia2_arch.rst, trainium2_arch.rst,
    trainium3_arch.rst; nki/migration/index.rst "Improved allocation API").
  - Tile limits: pmax 128, PSUM tile <= one bank (512 fp32), matmul stationary free <= 128, moving free <= 512
    on v2/v3 and up to all 8 banks on v4 (4096 fp32 / 8192 bf16 dst); bn_stats free <= 512; VectorE/ScalarE
    free size <= 64K elements from SBUF, 4K from PSUM (nki/api/nki/isa nc_matmul, arch guides).
  - Engine data-path widths and clocks (the arch guides' "Compute Engine Specifications" tables), TensorE's
    initiation interval max(N, 64) cycles per matmul with 4x for fp32 inputs, ~60 cycles of SBUF/PSUM access
    overhead per instruction, 16 DMA engines of 27 GiB/s each (trainium_inferentia2_arch.rst "Cost Model",
    "Tensor access overhead", "Data movement between HBM and SBUF using DMAs").
"""

from __future__ import annotations

import os
from dataclasses import dataclass

KiB = 1024


@dataclass(frozen=True)
class Generation:
    version: int                     # 2, 3, 4 (nki.isa.nc_version.gen2/3/4)
    chips: str                       # the chips built on it
    sbuf_partition_bytes: int        # SBUF bytes per partition
    tensor_ghz: float
    vector_ghz: float
    scalar_ghz: float
    gpsimd_ghz: float
    vector_wide_lanes: int           # elements/cycle for bf16/fp16(/fp8 on v4) on VectorE
    vector_lanes: int                # elements/cycle for other dtypes on VectorE
    scalar_wide_lanes: int           # elements/cycle for bf16/fp16/fp8 on ScalarE
    scalar_lanes: int
    max_lnc: int                     # logical NeuronCore degree a kernel can launch with (kernel[2])
    pmax: int = 128
    psum_partition_bytes: int = 16 * KiB
    psum_banks: int = 8
    psum_bank_bytes: int = 2 * KiB
    gemm_stationary_fmax: int = 128
    bn_stats_fmax: int = 512
    vector_sbuf_fmax: int = 64 * 1024   # elements per partition an engine streams from SBUF in one instruction
    vector_psum_fmax: int = 4 * 1024    # ... from PSUM
    mm_init_cycles: int = 64            # TensorE MM_INIT_LATENCY
    access_overhead_cycles: int = 60    # static SBUF/PSUM access overhead per compute instruction
    dma_engines: int = 16
    dma_engine_bytes_per_s: float = 27 * 1024 ** 3

    @property
    def name(self) -> str:
        return f"NeuronCore-v{self.version}"

    @property
    def psum_bank_fmax(self) -> int:
        return self.psum_bank_bytes // 4

    def gemm_moving_fmax(self, dst_itemsize: int = 4) -> int:
        """Largest moving free size: one PSUM bank on v2/v3, all eight on v4 (4096 fp32 / 8192 bf16)."""
        if self.version >= 4:
            return self.psum_banks * self.psum_bank_bytes // dst_itemsize
        return self.psum_bank_fmax

    @property
    def sbuf_bytes(self) -> int:
        return self.sbuf_partition_bytes * self.pmax


GENERATIONS = {
    2: Generation(2, "Trainium1 / Inferentia2", 192 * KiB, tensor_ghz=2.8, vector_ghz=1.12, scalar_ghz=1.4,
                  gpsimd_ghz=1.4, vector_wide_lanes=128, vector_lanes=128, scalar_wide_lanes=128, scalar_lanes=128,
                  max_lnc=1),
    3: Generation(3, "Trainium2", 224 * KiB, tensor_ghz=2.4, vector_ghz=0.96, scalar_ghz=1.2, gpsimd_ghz=1.2,
                  vector_wide_lanes=512, vector_lanes=256, scalar_wide_lanes=128, scalar_lanes=128, max_lnc=2),
    4: Generation(4, "Trainium3", 256 * KiB, tensor_ghz=2.4, vector_ghz=1.2, scalar_ghz=1.2, gpsimd_ghz=1.2,
                  vector_wide_lanes=512, vector_lanes=256, scalar_wide_lanes=256, scalar_lanes=128, max_lnc=2),
}

# NEURON_PLATFORM_TARGET_OVERRIDE values AWS's NKI accepts (nki/api/nki/__init__.py, nki.jit)
_OVERRIDES = {"trn1": 2, "inf2": 2, "gen2": 2, "trn2": 3, "gen3": 3, "trn3": 4, "gen4": 4}
_CHIP_VERSION = {"v2": 2, "v3": 3, "v4": 4}


class TargetError(ValueError):
    pass


def current() -> Generation:
    """The generation kernels are built for now (read on every kernel launch: tests switch it)."""
    override = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "").strip().lower()
    if override:
        if override not in _OVERRIDES:
            raise TargetError(
                f"NEURON_PLATFORM_TARGET_OVERRIDE={override!r} is not a Neuron platform target. "
                f"Use one of {', '.join(sorted(_OVERRIDES))} (trn1/inf2/gen2: NeuronCore-v2, trn2/gen3: v3, "
                "trn3/gen4: v4), or unset it to follow the emulated instance (TORCHNEURON_INSTANCE).")
        return GENERATIONS[_OVERRIDES[override]]
    from ..runtime.topology import instance_name, instance_type
    inst = instance_type(instance_name(), source="TORCHNEURON_INSTANCE")
    return GENERATIONS[_CHIP_VERSION[inst.core_version]]
