"""Which NeuronCores this process sees: instance type, core count, HBM per core.

Real instance shapes (AWS documentation):
  Trainium1 chip: 2 NeuronCore-v2, 32 GiB HBM (16 GiB per core).
  Trainium2 chip: 8 physical NeuronCore-v3, 96 GiB HBM. Logical NeuronCore config (LNC) 2
    (the default) pairs physical cores: 4 logical cores of 24 GiB per chip; LNC=1: 8 of 12 GiB.
  Inferentia2 chip: 2 NeuronCore-v2, 32 GiB HBM (16 GiB per core).

Environment, as the Neuron runtime reads it:
  TORCHNEURON_INSTANCE      instance type to emulate (default trn1.32xlarge)
  NEURON_LOGICAL_NC_CONFIG  1 or 2, trn2 only
  NEURON_RT_VISIBLE_CORES   cores this process may use: "3", "0-3", "0,2,4-5"
  NEURON_RT_NUM_CORES       take the first N cores (not together with VISIBLE_CORES)
  TORCHNEURON_HBM_PER_CORE  shrink each core's HBM budget ("512MiB", "2GiB"), e.g. to rehearse
                            out-of-memory handling; it cannot exceed the instance's real HBM
"""

from __future__ import annotations

import os
from dataclasses import dataclass

GiB = 1 << 30
DEFAULT_INSTANCE = "trn1.32xlarge"


@dataclass(frozen=True)
class InstanceType:
    name: str
    chip: str            # Trainium1 / Trainium2 / Inferentia2
    chips: int
    cores_per_chip: int  # physical cores
    hbm_per_chip: int    # bytes
    core_version: str

    def cores(self, lnc: int = 1) -> int:
        return self.chips * self.cores_per_chip // lnc

    def hbm_per_core(self, lnc: int = 1) -> int:
        return self.hbm_per_chip * lnc // self.cores_per_chip


def _trn1(name, chips):
    return InstanceType(name, "Trainium1", chips, 2, 32 * GiB, "v2")


def _trn2(name, chips):
    return InstanceType(name, "Trainium2", chips, 8, 96 * GiB, "v3")


def _inf2(name, chips):
    return InstanceType(name, "Inferentia2", chips, 2, 32 * GiB, "v2")


INSTANCES: dict[str, InstanceType] = {
    i.name: i
    for i in [
        _trn1("trn1.2xlarge", 1),
        _trn1("trn1.32xlarge", 16),
        _trn1("trn1n.32xlarge", 16),
        _trn2("trn2.3xlarge", 1),
        _trn2("trn2.48xlarge", 16),
        _trn2("trn2u.48xlarge", 16),
        _inf2("inf2.xlarge", 1),
        _inf2("inf2.8xlarge", 1),
        _inf2("inf2.24xlarge", 6),
        _inf2("inf2.48xlarge", 12),
    ]
}


class TopologyError(RuntimeError):
    """The environment asks for cores this emulated instance does not have."""


@dataclass(frozen=True)
class Topology:
    instance: InstanceType
    lnc: int                  # logical NeuronCore config (1 for trn1/inf2)
    visible: tuple[int, ...]  # instance-level core ids, in device-index order
    hbm_per_core: int

    @property
    def device_count(self) -> int:
        return len(self.visible)

    @property
    def total_cores(self) -> int:
        return self.instance.cores(self.lnc)

    def label(self, index: int) -> str:
        return f"neuron:{index} (NeuronCore {self.visible[index]} of {self.instance.name})"


def parse_core_list(spec: str, total: int, var: str = "NEURON_RT_VISIBLE_CORES") -> tuple[int, ...]:
    """Parse "3", "0-3" or "0,2,4-5" into core ids, checking each against the instance."""
    cores: list[int] = []
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                cores.extend(range(lo, hi + 1))
            else:
                cores.append(int(part))
        except ValueError:
            raise TopologyError(
                f"{var}={spec!r} is not a core list: use a core id (\"3\"), a range (\"0-3\") "
                f"or a comma-separated mix (\"0,2,4-5\")"
            ) from None
    if not cores:
        raise TopologyError(f"{var}={spec!r} names no cores: give at least one core id, e.g. {var}=0")
    bad = [c for c in cores if not 0 <= c < total]
    if bad:
        raise TopologyError(
            f"{var}={spec!r} names core(s) {bad} but this emulated instance has {total} cores "
            f"(ids 0..{total - 1}). Use ids in that range, or emulate a larger instance with TORCHNEURON_INSTANCE."
        )
    if len(set(cores)) != len(cores):
        raise TopologyError(f"{var}={spec!r} names a core twice: list each core once")
    return tuple(cores)


def discover(env: dict[str, str] | None = None) -> Topology:
    """Read the emulated topology from the environment, validating every variable."""
    env = os.environ if env is None else env
    name = env.get("TORCHNEURON_INSTANCE", DEFAULT_INSTANCE).strip()
    inst = INSTANCES.get(name)
    if inst is None:
        raise TopologyError(
            f"TORCHNEURON_INSTANCE={name!r} is not a known Neuron instance type. "
            f"Known: {', '.join(sorted(INSTANCES))}."
        )
    lnc = 1
    lnc_raw = env.get("NEURON_LOGICAL_NC_CONFIG")
    if inst.chip == "Trainium2":
        lnc = 2
        if lnc_raw:
            if lnc_raw.strip() not in ("1", "2"):
                raise TopologyError(f"NEURON_LOGICAL_NC_CONFIG={lnc_raw!r}: must be 1 or 2 on {name}")
            lnc = int(lnc_raw)
    elif lnc_raw and lnc_raw.strip() != "1":
        raise TopologyError(
            f"NEURON_LOGICAL_NC_CONFIG={lnc_raw!r} applies to Trainium2 only; {name} has LNC 1. Unset it."
        )
    total = inst.cores(lnc)
    vis = env.get("NEURON_RT_VISIBLE_CORES", "").strip()
    num = env.get("NEURON_RT_NUM_CORES", "").strip()
    if vis and num:
        raise TopologyError(
            "NEURON_RT_VISIBLE_CORES and NEURON_RT_NUM_CORES are both set: set only one of them"
        )
    if vis:
        visible = parse_core_list(vis, total)
    elif num:
        try:
            n = int(num)
        except ValueError:
            raise TopologyError(f"NEURON_RT_NUM_CORES={num!r} is not a whole number") from None
        if not 1 <= n <= total:
            raise TopologyError(f"NEURON_RT_NUM_CORES={n} but {name} has {total} cores: ask for 1..{total}")
        visible = tuple(range(n))
    else:
        visible = tuple(range(total))
    hbm = inst.hbm_per_core(lnc)
    override = env.get("TORCHNEURON_HBM_PER_CORE", "").strip()
    if override:
        want = parse_bytes(override, "TORCHNEURON_HBM_PER_CORE")
        if want > hbm:
            raise TopologyError(f"TORCHNEURON_HBM_PER_CORE={override!r} exceeds the {hbm // GiB} GiB per core of {name}: "
                                f"a budget can only shrink")
        hbm = want
    return Topology(inst, lnc, visible, hbm)


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30}


def parse_bytes(text: str, var: str) -> int:
    import re
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS or int(m.group(1)) <= 0:
        raise TopologyError(f"{var}={text!r} is not a size: write e.g. 512MiB or 2GiB")
    return int(m.group(1)) * _UNITS[unit]
