"""Which NeuronCore a rank uses: neuron:LOCAL_RANK, one rank per core.

A launcher (torchrun, or Accelerate/Transformers on top of it) starts one
process per core and tells each its LOCAL_RANK on its host. Every process
sees the whole emulated instance (TORCHNEURON_INSTANCE, default
trn1.32xlarge: 32 cores) and binds to core LOCAL_RANK:

* at import, so that code asking `torch.neuron.current_device()` before
  init_process_group (Accelerate) or building a DeviceMesh (which only sets
  the device when the device module says it is uninitialised) gets the rank's
  own core. `import torch` must not fail, so an impossible binding is left for
* process-group creation, which raises a clear error when a host runs more
  ranks than the instance has cores.

If the process was given its own cores the way the Neuron runtime does it
(NEURON_RT_VISIBLE_CORES=<one core> per process), it sees one device and binds
to neuron:0. The binding is per thread (the current device is, as in CUDA):
threads other than the importing one start on neuron:0, as they would on CUDA.
Multi-host runs need nothing more: LOCAL_RANK counts ranks on each host.
"""

from __future__ import annotations

import os

import torch


class RankBindingError(RuntimeError):
    """This host runs more ranks than the emulated instance has NeuronCores."""


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise RankBindingError(f"{name}={raw!r} is not a whole number; it is set by the launcher (torchrun)") from None


def rank_device(strict: bool, topology=None) -> int | None:
    """The device index of this rank, or None when no launcher gave a LOCAL_RANK.

    strict=False never raises (import time) and returns None for an
    impossible binding; strict=True raises RankBindingError naming the fix.
    `topology` defaults to this process's (torch_neuronx.runtime.topology()).
    """
    try:
        local_rank = _env_int("LOCAL_RANK")
        local_world = _env_int("LOCAL_WORLD_SIZE")
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
    cores = topo.device_count
    ranks_here = max(local_world or 0, local_rank + 1)
    if ranks_here <= cores:
        return local_rank
    own_cores = os.environ.get("NEURON_RT_VISIBLE_CORES") or os.environ.get("NEURON_RT_NUM_CORES")
    if cores == 1 and own_cores:
        return 0  # the Neuron runtime's recipe: each process was given exactly its core
    if not strict:
        return None
    total = topo.total_cores
    raise RankBindingError(
        f"LOCAL_RANK={local_rank}"
        + (f" of LOCAL_WORLD_SIZE={local_world}" if local_world is not None else "")
        + f": this host runs {ranks_here} ranks but the emulated {topo.instance.name} exposes {cores} NeuronCore(s)"
        + (f" (of its {total}, restricted by NEURON_RT_VISIBLE_CORES/NEURON_RT_NUM_CORES)" if cores != total else "")
        + ". Each rank needs its own core: launch at most "
        f"{cores} processes per host (torchrun --nproc-per-node {cores}), or emulate a larger instance "
        "(TORCHNEURON_INSTANCE=trn2.48xlarge has 64 cores, 128 with NEURON_LOGICAL_NC_CONFIG=1).")


def bind_at_import() -> None:
    """Make neuron:LOCAL_RANK current for the importing thread when that is possible."""
    index = rank_device(strict=False)
    if index is not None:
        torch.neuron.set_device(index)


def check_binding() -> int | None:
    """At process-group creation: raise if this host has more ranks than cores; return the rank's device."""
    return rank_device(strict=True)
