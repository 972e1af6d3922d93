"""The c10d backend "neuron": registration with torch.distributed and creation of process groups.

`init_process_group("neuron")` (what Transformers picks for the neuron device),
DeviceMesh("neuron", ...), new_group and split_group all end up in
`_create_backend`, which builds a C++ ProcessGroupNeuron (csrc/distributed/)
over a ProcessGroupGloo: gloo moves the bytes of neuron tensors through
zero-copy host aliases, over TCP, on one host or many.

The backend is registered for the neuron and cpu devices, so a group made with
"neuron" alone also serves CPU tensors (object collectives, CPU barriers)
through the same gloo, the way "gloo" serves both on CUDA machines.
"""

from __future__ import annotations

from datetime import timedelta

import torch.distributed as dist

BACKEND_NAME = "neuron"


def register_backend() -> None:
    if not dist.is_available():
        return
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["neuron", "cpu"])


def _create_backend(dist_opts, backend_options=None):
    """Creator called by torch.distributed for every process group on the "neuron" backend."""
    from ._native import native
    from .device_binding import check_binding

    check_binding()  # more ranks on this host than NeuronCores: a clear error, not a silent shared core
    from ..runtime import check_collective_group
    check_collective_group(dist_opts.group_size, list(dist_opts.global_ranks_in_group) or None)  # "Unsupported topology"
    if not dist.is_gloo_available():
        raise RuntimeError("The neuron c10d backend moves data with gloo, but this torch build has no gloo")
    timeout = dist_opts.timeout
    if backend_options is not None and getattr(backend_options, "timeout", None) is not None:
        timeout = backend_options.timeout
    options = native().Options(_as_timedelta(timeout))
    options.group_name = dist_opts.group_id
    options.global_ranks_in_group = list(dist_opts.global_ranks_in_group)
    host = _new_host_backend(dist_opts.store, dist_opts.group_rank, dist_opts.group_size, options)
    return native().ProcessGroupNeuron(host, options, _new_host_backend, dist_opts.store)


def _new_host_backend(store, rank: int, size: int, options):
    """The gloo process group that carries a neuron (sub)group's data.

    Built the way torch builds "gloo" (interfaces from GLOO_SOCKET_IFNAME, else
    this host's address), also for the subgroups split() makes.
    """
    gloo = dist.ProcessGroupGloo(store, rank, size, _as_timedelta(options.timeout))
    gloo.options.global_ranks_in_group = list(options.global_ranks_in_group)
    gloo.options.group_name = options.group_name
    return gloo


def _as_timedelta(t) -> timedelta:
    return t if isinstance(t, timedelta) else timedelta(seconds=float(t))
