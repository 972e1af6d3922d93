"""The emulated NeuronCore runtime, seen from Python.

This package is the one seam between TorchNeuron and a NeuronCore runtime. The
C++ half (csrc/runtime/Runtime.h: allocate/release/copy/synchronize) serves
the allocator, copies and kernels; this Python half decides the topology
(which instance, which cores, how much HBM each) and reports memory. A real
Neuron runtime would replace the emulator behind both halves and nothing
above them would change.
"""

from __future__ import annotations

import os
import threading

from .topology import (INSTANCES, MAX_VISIBLE_DEVICES, RUNTIME_RESERVE_PER_PHYSICAL_CORE, GiB,
                       InstanceType, Topology, TopologyError, announce_default_instance, bind_launched_rank,
                       default_instance, discover, instance_name)
from . import emulator, ownership
from .collective_groups import CollectiveTopologyError, check_collective_group, valid_collective_group_sizes

__all__ = ["default_instance", "instance_name", "INSTANCES", "MAX_VISIBLE_DEVICES", "RUNTIME_RESERVE_PER_PHYSICAL_CORE", "GiB",
           "InstanceType", "Topology", "TopologyError", "discover", "init", "started", "topology",
           "memory_stats", "synchronize", "reset_peak", "empty_cache", "cached_host_bytes", "held_cores", "HeldCore",
           "CollectiveTopologyError", "check_collective_group", "valid_collective_group_sizes"]

held_cores = ownership.held_cores
HeldCore = ownership.HeldCore

_topology: Topology | None = None
_error: TopologyError | None = None
_started = False
_starting = False
_lock = threading.RLock()


def init(binding: tuple[int, int] | None = None) -> None:
    """Start the runtime: read the environment, configure the cores. Once per process, at first device use.

    As the Neuron runtime (TorchNeuron's `_lazy_init`), it starts when a device is first used, not when
    `import torch` loads the plugin: launchers that set NEURON_RT_VISIBLE_CORES or LOCAL_RANK after the
    import and before the first device use (mp.spawn workers, PyTorch's MultiProcessTestCase) are obeyed.
    The C++ core calls it on the first call that needs the cores (csrc/runtime/Runtime.h, set_starter);
    `init_process_group("neuron")` calls it with `binding` = (local rank, ranks on this host) when no
    launcher said so. A bad environment is remembered, not raised: every device use raises it (so a bad
    NEURON_RT_VISIBLE_CORES never breaks `import torch`).
    """
    global _topology, _error, _started, _starting
    if _started:
        return
    with _lock:
        if _started or _starting:  # _starting: a call the configuration itself makes
            return
        _starting = True
        try:
            _start(binding)
        finally:
            _starting = False
            _started = True


def _start(binding: tuple[int, int] | None) -> None:
    global _topology, _error
    try:
        # As TorchNeuron: a launched rank (torchrun, accelerate launch) uses only its own core, NeuronCore
        # LOCAL_RANK, unless the user chose NEURON_RT_VISIBLE_CORES. Set before the runtime reads it.
        bind_launched_rank(os.environ, binding)
        topo = discover(binding=binding)
        lock_dir = ownership.instance_dir(topo.instance.name)
    except TopologyError as e:
        _error = e
        emulator.mark_unavailable(str(e))
        return
    from ..distributed.device_binding import rank_device
    default = rank_device(strict=False, topology=topo)  # a launched rank's own core
    emulator.configure(topo, topo.first_index if default is None else default)
    ownership.configure(topo, lock_dir)
    _topology = topo
    announce_default_instance(topo)


def started() -> bool:
    """Whether the runtime has started (TorchNeuron's `is_neuron_runtime_initialized()`); never starts it."""
    return _started


def topology() -> Topology:
    init()
    if _error is not None:
        raise TopologyError(str(_error))
    if _topology is None:  # only while the configuration itself runs
        raise TopologyError("the NeuronCore runtime is still starting")
    return _topology


def available() -> bool:
    init()
    return _error is None and _topology is not None and _topology.device_count > 0


memory_stats = emulator.memory_stats
synchronize = emulator.synchronize
reset_peak = emulator.reset_peak
empty_cache = emulator.empty_cache
cached_host_bytes = emulator.cached_host_bytes
