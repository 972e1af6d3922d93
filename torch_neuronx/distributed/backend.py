"""The c10d backend "neuron": registration with torch.distributed and creation of process groups.

`init_process_group("neuron")` (what Transformers picks for the neuron device),
DeviceMesh("neuron", ...), new_group and split_group all end up in
`_create_backend`, which builds a C++ ProcessGroupNeuron (csrc/distributed/)
over a ProcessGroupGloo: gloo moves the bytes of neuron tensors through
zero-copy host aliases, over TCP, on one host or many.

The backend is registered for the neuron device only, as TorchNeuron's: object
collectives and barriers of a "neuron" group run on neuron tensors, and CPU
tensors need a gloo group (`init_process_group("cpu:gloo,neuron:neuron")`, or
`new_group(backend="gloo")`); torch refuses them on a "neuron" group.
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
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["neuron"])


def _create_backend(dist_opts, backend_options=None):
    """Creator called by torch.distributed for every process group on the "neuron" backend."""
    from ._native import native
    from .device_binding import bind_at_process_group, check_binding

    from ..runtime import check_collective_group
    check_collective_group(dist_opts.group_size, list(dist_opts.global_ranks_in_group) or None)  # "Unsupported topology"
    if not dist.is_initialized():  # the default group: binds a rank no launcher bound, before its first device use
        bind_at_process_group(dist_opts.store, dist_opts.group_rank, dist_opts.group_size)
    check_binding()  # more ranks on this host than NeuronCores: a clear error, not a silent shared core
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


def __getattr__(name: str):
    """`torch_neuronx.distributed.backend.ProcessGroupNeuron`, as TorchNeuron names its backend class: ours is the
    C++ c10d::Backend (csrc/distributed/ProcessGroupNeuron.h), loaded on first access (not at `import torch`).
    A group's instance: `group._get_backend(torch.device("neuron"))`."""
    if name == "ProcessGroupNeuron":
        from ._native import native
        return native().ProcessGroupNeuron
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
