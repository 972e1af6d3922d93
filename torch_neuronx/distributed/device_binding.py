"""Which NeuronCore a rank uses: its own, NeuronCore LOCAL_RANK, as device neuron:LOCAL_RANK.

A launcher (torchrun, or Accelerate/Transformers/TRL on top of it) starts one process per core and
tells each its LOCAL_RANK on its host. As in TorchNeuron, when several ranks run (WORLD_SIZE > 1) and
the user has not chosen NEURON_RT_VISIBLE_CORES, the runtime sets it to LOCAL_RANK before it starts
(torch_neuronx.runtime.init, at first device use): each rank holds exactly one core. Device indices keep
TorchNeuron's numbering: a rank sees as many indices as there are ranks on its host, and its own core
is index LOCAL_RANK, the one Transformers (`torch.accelerator.set_device_index(local_rank)`),
Accelerate (`torch.neuron.current_device()`) and DeviceMesh (`rank % device_count`) bind to; the other
indices are its sibling ranks' cores, which it cannot use (a clear error names its own). So
`device_map="auto"` loads a model onto the rank's own core only, and code written for CUDA's
`cuda:LOCAL_RANK` runs unchanged.

The runtime makes that index the process's default device when it starts (so code asking
`current_device()` before init_process_group gets the rank's core). A process that creates the "neuron"
process group before its first device use without a launcher's LOCAL_RANK (mp.spawn workers, PyTorch's
MultiProcessTestCase) is bound there, as TorchNeuron's init_process_group does: its local rank and the
ranks on its host come from the group's store, and it holds NeuronCore <local rank>. The binding is
checked when a process group is created: more ranks on a host than cores, or a rank given several cores,
is a clear error. Multi-host runs need nothing more: LOCAL_RANK counts ranks on each host.
"""

from __future__ import annotations

import os
import socket

from ..runtime.topology import env_int


class RankBindingError(RuntimeError):
    """A rank cannot have a NeuronCore of its own (more ranks on this host than cores, or several cores)."""


def _launcher_int(name: str) -> int | None:
    return env_int(os.environ, name, RankBindingError, "; it is set by the launcher (torchrun)")


def rank_device(strict: bool, topology=None) -> int | None:
    """The device index of this rank, or None when no launcher gave a LOCAL_RANK.

    strict=False never raises (import time) and returns None for an impossible binding;
    strict=True raises RankBindingError (or the TopologyError of a bad environment) naming the fix.
    `topology` defaults to this process's (torch_neuronx.runtime.topology()).
    """
    try:
        local_rank = _launcher_int("LOCAL_RANK")
        local_world = _launcher_int("LOCAL_WORLD_SIZE")
    except RankBindingError:
        if strict:
            raise
        return None
    if local_rank is None:
        return None
    from .. import runtime
    try:
        topo = topology or runtime.topology()  # raises the TopologyError of a bad environment
    except runtime.TopologyError:
        if strict:
            raise
        return None
    ranks_here = max(local_world or 0, local_rank + 1)
    launched = topo.first_index == local_rank and topo.device_count >= ranks_here and topo.attached(local_rank)
    if launched:
        if len(topo.visible) == 1 or not strict:
            return local_rank
        raise RankBindingError(
            f"LOCAL_RANK={local_rank} holds {len(topo.visible)} NeuronCores "
            f"(NEURON_RT_VISIBLE_CORES={os.environ.get('NEURON_RT_VISIBLE_CORES')}): TorchNeuron allows one "
            f"device per process in a distributed job. Unset NEURON_RT_VISIBLE_CORES (each rank then takes "
            f"core LOCAL_RANK) or give each rank a single core.")
    cores = topo.device_count
    if ranks_here <= cores:
        return local_rank  # LOCAL_RANK without a multi-rank launch (WORLD_SIZE 1): the core of that index
    if not strict:
        return None
    raise RankBindingError(too_many_ranks(topo, local_rank, local_world, ranks_here))


def too_many_ranks(topo, local_rank: int, local_world: int | None, ranks_here: int) -> str:
    cores = topo.device_count
    total = topo.total_cores
    return (
        f"LOCAL_RANK={local_rank}"
        + (f" of LOCAL_WORLD_SIZE={local_world}" if local_world is not None else "")
        + f": this host runs {ranks_here} ranks but the emulated {topo.instance.name} exposes {cores} NeuronCore(s)"
        + (f" (of its {total}, restricted by NEURON_RT_VISIBLE_CORES/NEURON_RT_NUM_CORES)" if cores != total else "")
        + ". Each rank needs its own core: launch at most "
        f"{cores} processes per host (torchrun --nproc-per-node {cores}), or emulate a larger instance "
        "(TORCHNEURON_INSTANCE=trn2.48xlarge has 64 cores; NEURON_LOGICAL_NC_CONFIG=1 shows 128, of which "
        "TorchNeuron uses at most 127 per process).")


def bind_at_process_group(store, group_rank: int, group_size: int) -> None:
    """At the creation of the default "neuron" group, before the runtime started: bind this rank as a launch would.

    As TorchNeuron's ProcessGroupNeuron (`_set_rt_visible_cores`): the local rank and the number of ranks on
    this host come from the launcher (LOCAL_RANK, LOCAL_WORLD_SIZE), else from the ranks' hostnames in the
    group's store; the rank then holds NeuronCore <local rank> (unless NEURON_RT_VISIBLE_CORES says otherwise)
    as device neuron:<local rank>, and device_count() is the number of ranks on the host.
    """
    from .. import runtime
    if runtime.started() or group_size <= 1:
        return
    local_rank, local_world = _launcher_int("LOCAL_RANK"), _launcher_int("LOCAL_WORLD_SIZE")
    if local_rank is not None and local_world is not None:
        binding = (local_rank, max(local_world, local_rank + 1))
    else:
        binding = _ranks_on_this_host(store, group_rank, group_size)
    runtime.init(binding=binding)
    topo = runtime.topology()
    if len(topo.visible) > 1:
        raise RankBindingError(
            f"this rank (local rank {binding[0]}) holds {len(topo.visible)} NeuronCores (NEURON_RT_VISIBLE_CORES="
            f"{os.environ.get('NEURON_RT_VISIBLE_CORES')}): TorchNeuron allows one device per process in a "
            f"distributed job. Unset NEURON_RT_VISIBLE_CORES (each rank then takes core LOCAL_RANK) or give each "
            f"rank a single core.")


def _ranks_on_this_host(store, group_rank: int, group_size: int) -> tuple[int, int]:
    """(local rank, ranks on this host) from every rank's hostname, exchanged through the group's store."""
    host = socket.gethostname()
    store.set(f"torchneuron/hostname/{group_rank}", host)
    hosts = [store.get(f"torchneuron/hostname/{r}").decode() for r in range(group_size)]  # waits for each rank
    here = [r for r in range(group_size) if hosts[r] == host]
    return here.index(group_rank), len(here)


def check_binding() -> int | None:
    """At process-group creation: raise if this rank cannot have a core of its own; return its device."""
    return rank_device(strict=True)
