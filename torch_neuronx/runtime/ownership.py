"""Exclusive NeuronCore ownership across the processes of a host, as the Neuron runtime keeps it.

On Neuron a process reserves the cores it uses until it exits; a second process asking for a held
core fails (`nrt_allocate_neuron_cores`), and a stale process holding cores is a common reason a job
cannot start. The emulator keeps the rule with one lock file per physical NeuronCore in a registry
directory: on its first allocation a device takes a `flock` on the files of its physical cores (two
at LNC=2) and holds them until the process exits. The kernel drops the locks of a dead process, so a
crashed or SIGKILLed holder never blocks the next job. A core held by another process makes the first
allocation raise an error naming the core, the holder's PID and command line, and the fix. The lock
taking itself is in csrc/runtime/Emulator.cpp (it happens on the allocation path, without the GIL);
this module decides where the files live and reads them.

Registry directory (TORCHNEURON_CORE_REGISTRY; default $XDG_RUNTIME_DIR/torchneuron/cores, else
/tmp/torchneuron-<uid>/cores): private to the user, checked like the compile cache (owned by you,
0700, no directory above it writable by others without the sticky bit: compile/cache_trust.py), and
lock files are opened with O_NOFOLLOW and must be regular files you own. Each emulated instance type
has its own subdirectory. A multi-node torchrun started on one machine (GROUP_WORLD_SIZE > 1)
emulates one host per node: node N uses the subdirectory node-N. TORCHNEURON_CORE_REGISTRY=off
turns the rule off (every process may use every core, as before).

Read API, for `torchneuron ls` and `torchneuron top`:

    held_cores(instance=None) -> list[HeldCore]

one entry per core held by a live process: core (the holder's device core id at its LNC), lnc,
physical_cores, pid, command, hbm_in_use and hbm_peak (the holder's bytes allocated on that core and
their peak since it started or last called reset_peak_memory_stats), hbm_budget (the holder's budget
for the core), instance. The holder keeps its two numbers current in a shared mapping of the lock file
(two plain stores per allocation and free: no system call, no lock). Reading never blocks and never
takes a lock another process could notice for longer than a non-blocking probe; a dead process's
locks are gone, so its stale numbers are never read.
"""

from __future__ import annotations

import fcntl
import os
import struct
from dataclasses import dataclass

from .topology import Topology, TopologyError, instance_name, instance_type

USAGE_OFFSET = 128  # must match kUsageOffset in csrc/runtime/Emulator.cpp: int64 in use, then int64 peak
ENV = "TORCHNEURON_CORE_REGISTRY"


def registry_dir(env=None) -> str | None:
    """The registry directory for this process's host, or None when ownership is off."""
    env = os.environ if env is None else env
    raw = env.get(ENV, "").strip()
    if raw.lower() in ("off", "0", "none"):
        return None
    if raw:
        return raw
    runtime_dir = env.get("XDG_RUNTIME_DIR", "")
    if runtime_dir and os.path.isdir(runtime_dir):
        return os.path.join(runtime_dir, "torchneuron", "cores")
    return os.path.join("/tmp", f"torchneuron-{os.geteuid()}", "cores")


def _host_scope(env) -> str:
    """A multi-node launch on one machine emulates one host per node."""
    try:
        nodes = int(env.get("GROUP_WORLD_SIZE", "1") or 1)
    except ValueError:
        nodes = 1
    return f"node-{env.get('GROUP_RANK', '0')}" if nodes > 1 else ""


def instance_dir(instance: str, env=None) -> str | None:
    """The checked, private directory of an instance's lock files (created if missing), or None when off."""
    env = os.environ if env is None else env
    root = registry_dir(env)
    if root is None:
        return None
    from ..compile import cache_trust
    try:
        base = cache_trust.private_dir(root)
        return cache_trust.private_subdir(base, os.path.join(instance, _host_scope(env)) if _host_scope(env)
                                          else instance)
    except (cache_trust.Untrusted, OSError) as e:
        raise TopologyError(
            f"The NeuronCore ownership registry {root} cannot be used: {e}. Point {ENV} at a directory only you "
            f"can write (it is created 0700), or set {ENV}=off to share cores between processes.") from None


def physical_cores(core: int, lnc: int) -> list[int]:
    return list(range(core * lnc, core * lnc + lnc))


def free_cores(cores, lnc: int, holders: list["HeldCore"]) -> list[int]:
    """The cores (ids at LNC `lnc`) among `cores` none of whose physical cores a holder holds, whatever its LNC."""
    held = {p for h in holders for p in h.physical_cores}
    return [c for c in cores if held.isdisjoint(physical_cores(c, lnc))]


def _lock_file(directory: str, physical: int) -> str:
    return os.path.join(directory, f"nc{physical:03d}.lock")


def configure(topo: Topology, directory: str | None) -> None:
    """Hand the emulator the lock files (in `directory`, from instance_dir) of each device this process may use."""
    from .. import _C
    if directory is None:
        return
    files, headers = [], []
    for index in range(topo.device_count):
        core = topo.core_of(index)
        if topo.attached(index):
            files.append([_lock_file(directory, p) for p in physical_cores(core, topo.lnc)])
        else:
            files.append([])  # a sibling rank's core: never allocated here
        headers.append(f"pid {os.getpid()} core {core} lnc {topo.lnc} instance {topo.instance.name} "
                       f"budget {topo.hbm_per_core}")
    _C._set_core_registry(files, headers)


@dataclass(frozen=True)
class HeldCore:
    core: int                   # the holder's core id (at its LNC)
    lnc: int
    physical_cores: tuple[int, ...]
    pid: int
    command: str
    hbm_in_use: int             # bytes the holder has allocated on the core
    instance: str
    hbm_peak: int = 0           # the holder's peak of hbm_in_use (its max_memory_allocated)
    hbm_budget: int = 0         # the holder's HBM budget for the core (at LNC=1 on trn2/3: the shared bank's)


def _holder(path: str) -> tuple[dict, int, int] | None:
    """(header fields, bytes in use, their peak) of a lock file a live process holds, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            data = os.pread(fd, USAGE_OFFSET + 16, 0)
            words = data[:USAGE_OFFSET].decode(errors="replace").split()
            fields = dict(zip(words[::2], words[1::2]))
            used, peak = struct.unpack("<qq", data[USAGE_OFFSET:]) if len(data) == USAGE_OFFSET + 16 else (0, 0)
            return fields, used, peak
        fcntl.flock(fd, fcntl.LOCK_UN)  # nobody holds it: a core left by a finished process
        return None
    finally:
        os.close(fd)


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def held_cores(instance: str | None = None, env=None) -> list[HeldCore]:
    """The cores live processes hold on the emulated instance (default: this process's instance type)."""
    env = os.environ if env is None else env
    if instance is None:
        instance = instance_name(env)
    inst = instance_type(instance)
    directory = instance_dir(instance, env)
    if directory is None:
        return []
    groups: dict[tuple[int, int], list] = {}
    for name in sorted(os.listdir(directory)):
        if not (name.startswith("nc") and name.endswith(".lock")):
            continue
        found = _holder(os.path.join(directory, name))
        if found is None:
            continue
        fields, used, peak = found
        try:
            pid, core, lnc = int(fields["pid"]), int(fields["core"]), int(fields["lnc"])
            budget = int(fields.get("budget", inst.usable_bank_bytes()))
        except (KeyError, ValueError):
            continue  # held but not yet described: the holder is writing its header
        entry = groups.setdefault((pid, core), [lnc, [], 0, 0, budget])
        entry[1].append(int(name[2:-5]))
        entry[2], entry[3] = max(entry[2], used), max(entry[3], peak)  # published in the first file of the core
    return [HeldCore(core, lnc, tuple(phys), pid, _command(pid), used, instance, peak, budget)
            for (pid, core), (lnc, phys, used, peak, budget) in sorted(groups.items(),
                                                                        key=lambda kv: (kv[0][1], kv[0][0]))]
