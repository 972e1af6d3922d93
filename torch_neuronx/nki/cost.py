"""What a kernel call would cost on the NeuronCore: instructions per engine and an estimated time.

Each instruction is charged to its engine with the documented rates of the target generation (target.py):
  - TensorE: an nc_matmul streams its moving tile in max(N, 64) cycles (N = moving free size), 4x that
    for fp32/tf32 inputs; a transpose is a matmul against an identity (N = the input's partitions);
  - VectorE / ScalarE / GpSimd: elements per partition over the data-path width (elements/cycle over 128
    partitions), per input tile, plus ~60 cycles of SBUF/PSUM access overhead;
  - DMA: bytes over the DMA engines' bandwidth (27 GiB/s each, as many engines as partitions moved, <= 16).
The engines run concurrently on hardware, so the estimate of a call is the busiest engine's time (the other
engines' work hidden behind it); the serial sum is the upper bound. Both are estimates: what
`neuron-profile` measures on a device is the reference. Here nothing of this is measured.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

ENGINES = ("TensorE", "VectorE", "ScalarE", "GpSimd", "DMA")


@dataclass
class CallCost:
    """One kernel call: instructions and busy time (seconds) per engine."""

    instructions: dict = field(default_factory=lambda: {e: 0 for e in ENGINES})
    busy_s: dict = field(default_factory=lambda: {e: 0.0 for e in ENGINES})
    dma_bytes: int = 0

    def charge(self, engine: str, seconds: float) -> None:
        self.instructions[engine] += 1
        self.busy_s[engine] += seconds

    @property
    def estimated_s(self) -> float:
        """Estimated kernel time: the busiest engine (engines overlap)."""
        return max(self.busy_s.values())

    @property
    def serial_s(self) -> float:
        return sum(self.busy_s.values())

    def summary(self) -> str:
        parts = [f"{e} {self.instructions[e]}" for e in ENGINES if self.instructions[e]]
        return f"estimate {self.estimated_s * 1e6:.1f} us; instructions: {', '.join(parts) or 'none'}"


@dataclass
class KernelStats:
    """All calls of one kernel in this process (torch_neuronx.nki.statistics())."""

    name: str
    generation: str = ""
    calls: int = 0
    instructions: dict = field(default_factory=lambda: {e: 0 for e in ENGINES})
    busy_s: dict = field(default_factory=lambda: {e: 0.0 for e in ENGINES})
    estimated_s: float = 0.0          # sum over calls of each call's estimate
    dma_bytes: int = 0
    last: CallCost | None = None

    def add(self, cost: CallCost, generation: str) -> None:
        self.calls += 1
        self.generation = generation
        for e in ENGINES:
            self.instructions[e] += cost.instructions[e]
            self.busy_s[e] += cost.busy_s[e]
        self.estimated_s += cost.estimated_s
        self.dma_bytes += cost.dma_bytes
        self.last = cost

    def __repr__(self) -> str:
        return f"<KernelStats {self}>"

    def __str__(self) -> str:
        inst = ", ".join(f"{e} {n}" for e, n in self.instructions.items() if n)
        return (f"{self.name}: {self.calls} call(s) on {self.generation}, estimated {self.estimated_s * 1e6:.1f} us "
                f"in total (estimate, from documented engine rates); instructions: {inst or 'none'}")


_lock = threading.Lock()
_stats: dict[str, KernelStats] = {}


def record(name: str, cost: CallCost, generation: str) -> None:
    with _lock:
        s = _stats.get(name)
        if s is None:
            s = _stats[name] = KernelStats(name)
        s.add(cost, generation)


def statistics() -> dict[str, KernelStats]:
    """Per kernel: calls, instructions issued per engine, estimated time (an estimate: see torch_neuronx.nki.cost)."""
    with _lock:
        return dict(_stats)


def reset_statistics() -> None:
    with _lock:
        _stats.clear()


# -- instruction costs ----------------------------------------------------------------------------------

def _wide(dtype) -> bool:
    return dtype.itemsize <= 2 and dtype.is_float


def matmul_seconds(gen, moving_free: int, fp32_inputs: bool) -> float:
    cycles = max(moving_free, gen.mm_init_cycles) * (4 if fp32_inputs else 1)
    return cycles / (gen.tensor_ghz * 1e9)


def stream_seconds(gen, engine: str, elements_per_partition: int, inputs: int, dtype) -> float:
    """A VectorE / ScalarE / GpSimd instruction streaming `inputs` tiles of `elements_per_partition`."""
    if engine == "VectorE":
        lanes, ghz = (gen.vector_wide_lanes if _wide(dtype) else gen.vector_lanes), gen.vector_ghz
    elif engine == "ScalarE":
        lanes, ghz = (gen.scalar_wide_lanes if _wide(dtype) else gen.scalar_lanes), gen.scalar_ghz
    else:
        lanes, ghz = 128, gen.gpsimd_ghz
    per_cycle = max(1, lanes // 128)
    cycles = (elements_per_partition * max(inputs, 1) + per_cycle - 1) // per_cycle + gen.access_overhead_cycles
    return cycles / (ghz * 1e9)


def dma_seconds(gen, nbytes: int, partitions: int) -> float:
    engines = max(1, min(gen.dma_engines, partitions))
    return nbytes / (engines * gen.dma_engine_bytes_per_s)
