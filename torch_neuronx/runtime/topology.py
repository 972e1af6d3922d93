"""Which NeuronCores this process sees: instance type, core count, HBM per core.

Real instance shapes (AWS documentation; docs/fidelity.md):
  Trainium1 chip: 2 NeuronCore-v2, 32 GiB HBM, one 16 GiB bank per core.
  Trainium2 chip: 8 physical NeuronCore-v3, 96 GiB HBM: one 24 GiB bank per pair of physical cores.
  Trainium3 chip: 8 physical NeuronCore-v4, 144 GiB HBM: one 36 GiB bank per pair.
  Inferentia2 chip: 2 NeuronCore-v2, 32 GiB HBM, one 16 GiB bank per core.
  Logical NeuronCore config (LNC) on Trainium2 and Trainium3: LNC=2 (the default) makes each pair of
  physical cores one logical core that owns the pair's bank; LNC=1 shows every physical core, and the
  two cores of a pair share their bank (one may use more than half while its neighbour uses less).
  The runtime keeps about 96 MiB per physical core for itself (microcode, runtime state), so a bank
  offers that much less to tensors.
  The real TorchNeuron runs on Trn2 and Trn3 only: the default here is the largest Trainium2 instance
  this host can run one process per core of (default_instance: trn2.48xlarge, 64 cores of 24 GiB at
  LNC=2, on a large host; trn2.3xlarge, 4 cores, otherwise); trn1/inf2 stay selectable for older jobs.
  Trn3 comes as UltraServers whose servers AWS names no instance size for: "trn3-gen1" is one server
  of a Gen1 UltraServer (16 chips), "trn3-gen2" one of a Gen2 UltraServer (4 chips).

Environment, as the Neuron runtime reads it:
  TORCHNEURON_INSTANCE        instance type to emulate (default: default_instance(), from the host)
  NEURON_LOGICAL_NC_CONFIG    1 or 2 on Trainium2/Trainium3 (default 2); 1 elsewhere
  NEURON_RT_VISIBLE_CORES     the cores this process may use: one core ("3") or one contiguous,
                              increasing range ("0-3"); wins over NEURON_RT_NUM_CORES
  NEURON_RT_NUM_CORES         take N consecutive cores no other process holds (0: all, the default)
  NEURON_RT_STOCHASTIC_ROUNDING_EN  0/1: fp32 -> bf16 rounding (applied by the kernels, see dtypes)
  NEURON_CC_FLAGS             compiler flags; a `--lnc N` in them must equal the runtime's LNC
  TORCHNEURON_HBM_PER_CORE    shrink each bank's budget ("512MiB", "2GiB"), e.g. to rehearse
                              out-of-memory handling; it cannot exceed what the instance offers
  Under a launcher (LOCAL_RANK set and WORLD_SIZE > 1), see `launch_binding`.
At most 127 devices may be visible to a process (TorchNeuron refuses 128 or more).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from typing import Mapping

MiB = 1 << 20
GiB = 1 << 30
# The emulated instance when TORCHNEURON_INSTANCE is unset (default_instance): trn2.48xlarge when the host
# can run its 64 ranks, one process per core, else trn2.3xlarge.
LARGE_DEFAULT_INSTANCE, SMALL_DEFAULT_INSTANCE = "trn2.48xlarge", "trn2.3xlarge"
LARGE_DEFAULT_MIN_CPUS, LARGE_DEFAULT_MIN_RAM = 32, 128 * (1 << 30)
RUNTIME_RESERVE_PER_PHYSICAL_CORE = 96 * MiB
MAX_VISIBLE_DEVICES = 127


@dataclass(frozen=True)
class InstanceType:
    name: str
    chip: str              # Trainium1 / Trainium2 / Trainium3 / Inferentia2
    chips: int
    cores_per_chip: int    # physical cores
    hbm_per_chip: int      # bytes
    core_version: str      # v2 / v3 / v4
    cores_per_bank: int    # physical cores that share one HBM bank (1 on v2, a pair on v3/v4)
    collectives: str       # how the chips are linked: "torus" (trn1/trn2), "ring" (inf2), "switch" (trn3), "none"

    @property
    def lnc_choices(self) -> tuple[int, ...]:
        return (1, 2) if self.cores_per_bank == 2 else (1,)

    @property
    def default_lnc(self) -> int:
        return max(self.lnc_choices)

    @property
    def supported_by_torchneuron(self) -> bool:
        """The real TorchNeuron runs on Trainium2 and Trainium3 only."""
        return self.chip in ("Trainium2", "Trainium3")

    def cores(self, lnc: int = 1) -> int:
        return self.chips * self.cores_per_chip // lnc

    def bank_bytes(self) -> int:
        """HBM of one bank, before the runtime's reserve."""
        return self.hbm_per_chip * self.cores_per_bank // self.cores_per_chip

    def usable_bank_bytes(self) -> int:
        """What one bank offers to tensors: the runtime keeps its reserve for each physical core on it."""
        return self.bank_bytes() - self.cores_per_bank * RUNTIME_RESERVE_PER_PHYSICAL_CORE

    def shares_bank(self, lnc: int) -> bool:
        """At LNC=1 on Trainium2/3 the two visible cores of a pair draw on one bank."""
        return self.cores_per_bank // lnc > 1


def _chip(chip, cores, hbm_gib, version, per_bank, links):
    def make(name, chips):
        return InstanceType(name, chip, chips, cores, hbm_gib * GiB, version, per_bank,
                            links if chips > 1 else "none")
    return make


_trn1 = _chip("Trainium1", 2, 32, "v2", 1, "torus")
_trn2 = _chip("Trainium2", 8, 96, "v3", 2, "torus")
_trn3 = _chip("Trainium3", 8, 144, "v4", 2, "switch")
_inf2 = _chip("Inferentia2", 2, 32, "v2", 1, "ring")

INSTANCES: dict[str, InstanceType] = {
    i.name: i
    for i in [
        _trn2("trn2.3xlarge", 1),
        _trn2("trn2.48xlarge", 16),
        _trn2("trn2u.48xlarge", 16),
        _trn3("trn3-gen1", 16),
        _trn3("trn3-gen2", 4),
        _trn1("trn1.2xlarge", 1),
        _trn1("trn1.32xlarge", 16),
        _trn1("trn1n.32xlarge", 16),
        _inf2("inf2.xlarge", 1),
        _inf2("inf2.8xlarge", 1),
        _inf2("inf2.24xlarge", 6),
        _inf2("inf2.48xlarge", 12),
    ]
}


class TopologyError(RuntimeError):
    """The environment asks for cores this emulated instance does not have."""


def instance_type(name: str, error: type[Exception] = TopologyError, source: str = "") -> InstanceType:
    """The instance type NAME; else `error` naming the known ones (the one lookup by name).

    `source` is where the name came from (an environment variable, a CLI option), shown in the message.
    """
    inst = INSTANCES.get(name)
    if inst is None:
        raise error(f"{source + '=' if source else ''}{name!r} is not a known Neuron instance type. "
                    f"Known: {', '.join(sorted(INSTANCES))}.")
    return inst


@dataclass(frozen=True)
class Topology:
    """The devices of this process.

    Device indices run 0..device_count-1. This process holds the cores `visible`, as devices
    first_index .. first_index+len(visible)-1. Outside a launcher first_index is 0 and
    device_count == len(visible). Under torchrun, as in TorchNeuron, device_count is the number of
    ranks on the host and a rank holds only its own core, as device LOCAL_RANK: the other indices are
    its sibling ranks' cores, which this process cannot use (see launch_binding).
    """
    instance: InstanceType
    lnc: int                    # logical NeuronCore config (1 for trn1/inf2)
    visible: tuple[int, ...]    # instance-level core ids this process holds, in device-index order
    hbm_per_core: int           # bytes a device can reach: its bank's usable bytes (shared at LNC=1 on trn2/3)
    first_index: int = 0        # device index of visible[0]
    device_count: int = -1      # number of device indices (-1: len(visible))
    stochastic_rounding: bool = False

    def __post_init__(self):
        if self.device_count < 0:
            object.__setattr__(self, "device_count", len(self.visible))

    @property
    def total_cores(self) -> int:
        return self.instance.cores(self.lnc)

    @property
    def shared_bank(self) -> bool:
        return self.instance.shares_bank(self.lnc)

    def attached(self, index: int) -> bool:
        return self.first_index <= index < self.first_index + len(self.visible)

    def core_of(self, index: int) -> int:
        """Instance-level core id of a device index (a sibling rank's core for an index not attached here)."""
        return self.visible[0] + index - self.first_index if self.visible else index

    def bank_of(self, index: int) -> int:
        """HBM bank of a device: cores of one bank share its budget (LNC=1 on trn2/trn3)."""
        per_bank = self.instance.cores_per_bank // self.lnc
        return self.core_of(index) // per_bank

    def label(self, index: int) -> str:
        return f"neuron:{index} (NeuronCore {self.core_of(index)} of {self.instance.name})"


def _visible_cores_rule(var: str) -> str:
    return (f"the Neuron runtime accepts in {var} one core (\"3\") or one contiguous, increasing range "
            f"(\"0-3\"); lists such as \"0,2,4-5\" are rejected")


def parse_core_list(spec: str, total: int, var: str = "NEURON_RT_VISIBLE_CORES") -> tuple[int, ...]:
    """Parse "3" or "0-3" as the Neuron runtime does, checking each core against the instance."""
    text = spec.replace(" ", "")
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", text)
    if not m:
        if "," in text:
            raise TopologyError(
                f"{var}={spec!r} is a list of cores, which the Neuron runtime rejects: "
                f"{_visible_cores_rule(var)}. Give each process one range (e.g. {var}=0-3), or launch one "
                f"process per range.")
        raise TopologyError(f"{var}={spec!r} is not a core id or range: {_visible_cores_rule(var)}")
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) is not None else lo
    if hi < lo:
        raise TopologyError(f"{var}={spec!r} is a decreasing range: {_visible_cores_rule(var)}. "
                            f"Write it as {var}={hi}-{lo}.")
    if hi >= total:
        raise TopologyError(
            f"{var}={spec!r} names core(s) {list(range(max(lo, total), hi + 1))[:8]} but this emulated instance "
            f"has {total} cores (ids 0..{total - 1}). Use ids in that range, or emulate a larger instance with "
            f"TORCHNEURON_INSTANCE.")
    return tuple(range(lo, hi + 1))


def env_int(env: Mapping[str, str], name: str, error: type[Exception] = TopologyError, hint: str = "") -> int | None:
    """The whole number in env[name], None when unset or empty; else `error` naming the variable.

    The one parser of integer environment variables (the runtime's and the launcher's); the caller
    chooses the error type its users catch (TopologyError here, RankBindingError for a rank's binding)
    and may add a hint about who sets the variable.
    """
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise error(f"{name}={raw!r} is not a whole number{hint}") from None


def host_resources() -> tuple[int, int]:
    """(CPUs this process may run on, bytes of RAM it may use): the affinity mask, and the smaller of
    MemTotal and the cgroup's memory limit (a container's)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    ram = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    ram = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(limit_file) as f:
                raw = f.read().strip()
        except OSError:
            continue
        if raw.isdigit() and 0 < int(raw) < (ram or int(raw) + 1):
            ram = int(raw)
    return cpus, ram


def default_instance(resources: tuple[int, int] | None = None) -> str:
    """The instance emulated when TORCHNEURON_INSTANCE is unset: what this host can run.

    Launchers start one process per core by default (`accelerate launch` and the TRL CLI without
    --num_processes): a trn2.48xlarge's 64 ranks need a large host (at least LARGE_DEFAULT_MIN_CPUS CPUs and
    LARGE_DEFAULT_MIN_RAM of RAM, 2 GiB per rank); elsewhere the default is a trn2.3xlarge (one Trainium2
    chip, 4 cores of 24 GiB at LNC=2). Every named instance stays available through TORCHNEURON_INSTANCE.
    """
    cpus, ram = resources or host_resources()
    large = cpus >= LARGE_DEFAULT_MIN_CPUS and ram >= LARGE_DEFAULT_MIN_RAM
    return LARGE_DEFAULT_INSTANCE if large else SMALL_DEFAULT_INSTANCE


def instance_name(env: Mapping[str, str] | None = None) -> str:
    """The instance type this process emulates: TORCHNEURON_INSTANCE, else default_instance()."""
    env = os.environ if env is None else env
    return env.get("TORCHNEURON_INSTANCE", "").strip() or default_instance()


def announce_default_instance(topo: "Topology", env: Mapping[str, str] | None = None) -> None:
    """Say once, when the runtime starts on the host-chosen default, which instance it is and the switch; the
    processes it starts inherit the choice (TORCHNEURON_INSTANCE).

    Only the first rank speaks (LOCAL_RANK, else RANK, unset or 0): a launch of N ranks prints one line (ranks an
    mp.spawn sets RANK for later still print at their start).
    """
    env = os.environ if env is None else env
    if env.get("TORCHNEURON_INSTANCE", "").strip():
        return
    # The processes this one starts (`accelerate launch` counts the cores, then starts one rank per core) run
    # on the same instance, and do not say it again.
    if env is os.environ:
        os.environ["TORCHNEURON_INSTANCE"] = topo.instance.name
    rank = env.get("LOCAL_RANK", env.get("RANK", "0")).strip()
    if rank not in ("", "0"):
        return
    import sys
    cpus, ram = host_resources()
    name = topo.instance.name
    why = ("this host runs one process per core of it" if name == LARGE_DEFAULT_INSTANCE else
           f"a {LARGE_DEFAULT_INSTANCE}'s 64 ranks (one process per core) need at least {LARGE_DEFAULT_MIN_CPUS} CPUs "
           f"and {LARGE_DEFAULT_MIN_RAM >> 30} GiB of RAM")
    print(f"TorchNeuron: emulating {name} ({topo.total_cores} NeuronCores at LNC={topo.lnc}) on this host "
          f"({cpus} CPUs, {ram / (1 << 30):.0f} GiB RAM): {why}. Set TORCHNEURON_INSTANCE to choose another "
          f"(e.g. TORCHNEURON_INSTANCE={LARGE_DEFAULT_INSTANCE}).", file=sys.stderr, flush=True)


def launch_binding(env: Mapping[str, str]) -> tuple[int, int] | None:
    """(LOCAL_RANK, ranks on this host) when a launcher runs several ranks, else None.

    torchrun, `accelerate launch` and the TRL/Transformers CLIs on top of them set LOCAL_RANK and
    WORLD_SIZE. As TorchNeuron does, such a rank uses exactly one core, NeuronCore LOCAL_RANK
    (NEURON_RT_VISIBLE_CORES=LOCAL_RANK unless the user set it), seen as device neuron:LOCAL_RANK:
    the index Transformers, Accelerate and DeviceMesh bind a rank to.
    """
    local_rank = env_int(env, "LOCAL_RANK")
    world = env_int(env, "WORLD_SIZE")
    if local_rank is None or world is None or world <= 1:
        return None
    local_world = env_int(env, "LOCAL_WORLD_SIZE")
    return local_rank, max(local_world or 0, local_rank + 1)


def bind_launched_rank(env: dict[str, str], binding: tuple[int, int] | None = None) -> None:
    """Give a launched rank its own core the way TorchNeuron does: NEURON_RT_VISIBLE_CORES=LOCAL_RANK.

    Must run before the runtime reads the environment; a value the user set wins. `binding` (local rank,
    ranks on this host) when a process group said so, else the launcher's environment.
    """
    binding = binding or launch_binding(env)
    if binding is not None and not env.get("NEURON_RT_VISIBLE_CORES", "").strip():
        env["NEURON_RT_VISIBLE_CORES"] = str(binding[0])


def _lnc(inst: InstanceType, env: Mapping[str, str]) -> int:
    raw = env.get("NEURON_LOGICAL_NC_CONFIG", "").strip()
    if not raw:
        return inst.default_lnc
    if raw not in ("1", "2"):
        raise TopologyError(f"NEURON_LOGICAL_NC_CONFIG={raw!r}: must be 1 or 2")
    lnc = int(raw)
    if lnc not in inst.lnc_choices:
        raise TopologyError(
            f"NEURON_LOGICAL_NC_CONFIG={raw!r}: logical NeuronCores apply to Trainium2 and Trainium3 only; "
            f"{inst.name} ({inst.chip}) has LNC 1. Unset it.")
    return lnc


def compiler_lnc(flags: str) -> int | None:
    """The `--lnc N` / `-lnc=N` / `--logical-nc-config N` in NEURON_CC_FLAGS, if any."""
    try:
        words = shlex.split(flags)
    except ValueError:
        raise TopologyError(f"NEURON_CC_FLAGS={flags!r} cannot be split into words (unbalanced quotes)") from None
    for i, w in enumerate(words):
        name, eq, value = w.partition("=")
        if name in ("--lnc", "-lnc", "--logical-nc-config"):
            if not eq:
                value = words[i + 1] if i + 1 < len(words) else ""
            if value not in ("1", "2"):
                raise TopologyError(f"NEURON_CC_FLAGS={flags!r}: {name} takes 1 or 2, got {value!r}")
            return int(value)
    return None


def _flag(env: Mapping[str, str], name: str) -> bool:
    """A boolean runtime variable: 0, 1, false or true, case-insensitively (the runtime's reference)."""
    raw = env.get(name, "").strip().lower()
    if raw in ("", "0", "false"):
        return False
    if raw in ("1", "true"):
        return True
    raise TopologyError(f"{name}={env.get(name)!r}: must be 0 or 1 (or false / true)")


def _free_cores(inst: InstanceType, lnc: int, n: int, env: Mapping[str, str]) -> tuple[int, ...]:
    """NEURON_RT_NUM_CORES=n: the first n consecutive cores no other process holds.

    The Neuron runtime reserves n *free* cores for the process (cores are exclusive per process;
    runtime/ownership.py keeps that rule here), in consecutive groups as its NEURON_RT_NUM_CORES guides
    describe. We take the lowest such group. A core at this LNC is free when none of its physical cores
    is held, whatever LNC the holder runs. The cores are taken at the process's first allocation on each,
    so two processes started at the same instant may pick the same group; the second then fails there
    with the holder named, as it would if it had asked for those cores by NEURON_RT_VISIBLE_CORES.
    """
    from .ownership import free_cores, held_cores
    holders = held_cores(inst.name, env)
    total = inst.cores(lnc)
    free = set(free_cores(range(total), lnc, holders))
    run: list[int] = []
    for core in range(total):
        if core in free:
            run.append(core)
            if len(run) == n:
                return tuple(run)
        else:
            run = []
    busy = ", ".join(f"core {h.core} (LNC={h.lnc}) by process {h.pid}" + (f" ({h.command})" if h.command else "")
                     for h in holders)
    raise TopologyError(
        f"NEURON_RT_NUM_CORES={n}: {inst.name} has no {n} consecutive free NeuronCores at LNC={lnc} "
        f"(held: {busy}). Cores are exclusive per process: stop the holder (a finished or killed process frees "
        f"its cores), ask for fewer, or choose free cores with NEURON_RT_VISIBLE_CORES. `torchneuron ls` shows "
        f"the holders.")


def discover(env: Mapping[str, str] | None = None, binding: tuple[int, int] | None = None) -> Topology:
    """Read the emulated topology from the environment, validating every variable.

    `binding`: (local rank, ranks on this host) of a rank whose process group derived them (no launcher
    set LOCAL_RANK); by default a launcher's LOCAL_RANK / LOCAL_WORLD_SIZE / WORLD_SIZE (launch_binding).
    """
    env = os.environ if env is None else env
    name = instance_name(env)
    inst = instance_type(name, source="TORCHNEURON_INSTANCE")
    lnc = _lnc(inst, env)
    cc_lnc = compiler_lnc(env.get("NEURON_CC_FLAGS", ""))
    if cc_lnc is not None and cc_lnc != lnc:
        raise TopologyError(
            f"NEURON_CC_FLAGS asks the compiler for --lnc {cc_lnc} but the runtime runs LNC={lnc} "
            f"(NEURON_LOGICAL_NC_CONFIG): graphs compiled for one LNC do not load under the other. "
            f"Make them equal (NEURON_LOGICAL_NC_CONFIG={cc_lnc}, or drop --lnc from NEURON_CC_FLAGS).")
    total = inst.cores(lnc)
    binding = binding or launch_binding(env)
    if binding is not None and binding[1] > total:
        local_rank, ranks_here = binding
        raise TopologyError(
            f"LOCAL_RANK={local_rank}: this host runs {ranks_here} ranks but the emulated {name} has {total} "
            f"NeuronCores (LNC={lnc}). Each rank needs its own core: launch at most {total} processes per host "
            f"(torchrun --nproc-per-node {total}), or emulate a larger instance with TORCHNEURON_INSTANCE.")
    vis = env.get("NEURON_RT_VISIBLE_CORES", "").strip()
    if not vis and binding is not None:
        vis = str(binding[0])  # what bind_launched_rank sets: a launched rank holds NeuronCore LOCAL_RANK
    if vis:  # wins over NEURON_RT_NUM_CORES, as in the Neuron runtime
        visible = parse_core_list(vis, total)
        source = f"NEURON_RT_VISIBLE_CORES={vis}"
    else:
        n = env_int(env, "NEURON_RT_NUM_CORES") or 0
        if not 0 <= n <= total:
            raise TopologyError(f"NEURON_RT_NUM_CORES={n} but {name} has {total} cores: ask for 1..{total} "
                                f"(0 means all)")
        visible = _free_cores(inst, lnc, n, env) if n else tuple(range(total))
        source = f"NEURON_RT_NUM_CORES={n}" if n else f"all {total} cores of {name}"
    if len(visible) > MAX_VISIBLE_DEVICES:
        raise TopologyError(
            f"{len(visible)} NeuronCores are visible ({source}, LNC={lnc}) but TorchNeuron supports at most "
            f"{MAX_VISIBLE_DEVICES} devices per process. Restrict them, e.g. NEURON_RT_VISIBLE_CORES=0-63 or "
            f"NEURON_RT_NUM_CORES=64"
            + (", or use NEURON_LOGICAL_NC_CONFIG=2" if 2 in inst.lnc_choices and lnc == 1 else "") + ".")
    hbm = inst.usable_bank_bytes()
    override = env.get("TORCHNEURON_HBM_PER_CORE", "").strip()
    if override:
        want = parse_bytes(override, "TORCHNEURON_HBM_PER_CORE")
        if want > hbm:
            raise TopologyError(
                f"TORCHNEURON_HBM_PER_CORE={override!r} exceeds the {hbm / GiB:.2f} GiB a core of {name} offers "
                f"(its HBM bank less the runtime's reserve): a budget can only shrink")
        hbm = want
    first_index, count = 0, len(visible)
    if binding is not None:
        local_rank, ranks_here = binding
        first_index, count = local_rank, max(ranks_here, local_rank + len(visible))
    return Topology(inst, lnc, visible, hbm, first_index, count,
                    stochastic_rounding=_flag(env, "NEURON_RT_STOCHASTIC_ROUNDING_EN"))


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30}


def parse_bytes(text: str, var: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS or int(m.group(1)) <= 0:
        raise TopologyError(f"{var}={text!r} is not a size: write e.g. 512MiB or 2GiB")
    return int(m.group(1)) * _UNITS[unit]
