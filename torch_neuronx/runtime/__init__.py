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

from .topology import (DEFAULT_INSTANCE, INSTANCES, MAX_VISIBLE_DEVICES, RUNTIME_RESERVE_PER_PHYSICAL_CORE, GiB,
                       InstanceType, Topology, TopologyError, bind_launched_rank, discover)
from . import emulator, ownership
from .collective_groups import CollectiveTopologyError, check_collective_group, valid_collective_group_sizes

__all__ = ["DEFAULT_INSTANCE", "INSTANCES", "MAX_VISIBLE_DEVICES", "RUNTIME_RESERVE_PER_PHYSICAL_CORE", "GiB",
           "InstanceType", "Topology", "TopologyError", "discover", "init", "topology",
           "memory_stats", "synchronize", "reset_peak", "empty_cache", "cached_host_bytes", "held_cores", "HeldCore",
           "CollectiveTopologyError", "check_collective_group", "valid_collective_group_sizes"]

held_cores = ownership.held_cores
HeldCore = ownership.HeldCore

_topology: Topology | None = None
_error: TopologyError | None = None


def init() -> None:
    """Configure the cores from the environment; remember (not raise) a bad environment.

    `import torch` loads this plugin, so a bad NEURON_RT_VISIBLE_CORES must not
    break `import torch`: the error is raised on first use of the device.
    """
    global _topology, _error
    # As TorchNeuron: a launched rank (torchrun, accelerate launch) uses only its own core, NeuronCore
    # LOCAL_RANK, unless the user chose NEURON_RT_VISIBLE_CORES. Set before the runtime reads it.
    try:
        bind_launched_rank(os.environ)
        _topology = discover()
        lock_dir = ownership.instance_dir(_topology.instance.name)
    except TopologyError as e:
        _error = e
        emulator.mark_unavailable(str(e))
        return
    emulator.configure(_topology)
    ownership.configure(_topology, lock_dir)


def topology() -> Topology:
    if _error is not None:
        raise TopologyError(str(_error))
    assert _topology is not None, "torch_neuronx.runtime.init() was not called"
    return _topology


def available() -> bool:
    return _error is None and _topology is not None and _topology.device_count > 0


memory_stats = emulator.memory_stats
synchronize = emulator.synchronize
reset_peak = emulator.reset_peak
empty_cache = emulator.empty_cache
cached_host_bytes = emulator.cached_host_bytes
