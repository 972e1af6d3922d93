"""Compilation artifacts, where TorchNeuron writes them: each graph's FX graph and its StableHLO.

    TORCH_NEURONX_DEBUG_DIR                       directory (default /tmp/neuron_backend, as documented)
    TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS  1: keep them (default 0)

    <dir>/fx_graphs/proc_<rank>/<model>_<timestamp>_<kind>.fx.txt            the graph that was lowered
    <dir>/stablehlo/proc_<rank>/<model>_<timestamp>_<kind>.stablehlo.mlir    its StableHLO, readable text

TorchNeuron writes them during each compile and deletes them after it unless they are to be kept;
here they are written only when kept (the same files remain either way, and an unkept compile writes
nothing). `<model>` is set_model_name's (neuron_dynamo_backend), `<rank>` the process's rank, or its
NeuronCore when no process group is up; `<kind>` says forward, backward or inference (TorchNeuron
tells graphs apart by timestamp alone). A compile served by the cache writes its StableHLO from the
cache entry (nothing is lowered again).
"""

from __future__ import annotations

import datetime
import os
import threading

DEBUG_DIR_ENV = "TORCH_NEURONX_DEBUG_DIR"
PRESERVE_ENV = "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS"
DEFAULT_DEBUG_DIR = "/tmp/neuron_backend"

_lock = threading.Lock()
_model_name: str | None = None
_stamp = threading.local()


def set_model_name(name: str) -> None:
    """The model name in artifact file names (TorchNeuron's set_model_name)."""
    global _model_name
    _model_name = str(name)


def get_model_name() -> str:
    return _model_name if _model_name is not None else "model_default"


def get_rank() -> int:
    """The process's rank when a process group is up, else its current NeuronCore (as TorchNeuron)."""
    import torch
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return torch.neuron.current_device()


def preserved() -> bool:
    return os.environ.get(PRESERVE_ENV, "0").strip().lower() in ("1", "true", "yes")


def debug_dir() -> str:
    return os.path.abspath(os.path.expanduser(os.environ.get(DEBUG_DIR_ENV) or DEFAULT_DEBUG_DIR))


def begin_graph() -> None:
    """A new timestamp for the graph about to be compiled (its artifacts share it)."""
    _stamp.value = datetime.datetime.now().strftime("%Y%m%d_%H%M%S_%f")


def _path(subdir: str, kind: str, suffix: str) -> str:
    directory = os.path.join(debug_dir(), subdir, f"proc_{get_rank()}")
    os.makedirs(directory, exist_ok=True)
    stamp = getattr(_stamp, "value", None)
    if stamp is None:
        begin_graph()
        stamp = _stamp.value
    return os.path.join(directory, f"{get_model_name().lower()}_{stamp}_{kind}{suffix}")


def _write(path: str, text: str) -> str:
    # O_NOFOLLOW: never write through a link someone planted in a shared /tmp directory
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def save_fx_graph(gm, kind: str) -> dict[str, str]:
    """Write the FX graph about to be lowered, when artifacts are kept; {"fx": path} or {}."""
    if not preserved():
        return {}
    with _lock:
        return {"fx": _write(_path("fx_graphs", kind, ".fx.txt"), gm.print_readable(print_output=False))}


def save_stablehlo(text: str, kind: str) -> str | None:
    if not preserved():
        return None
    with _lock:
        return _write(_path("stablehlo", kind, ".stablehlo.mlir"), text)


def save_cached(gm, stablehlo: str | None, kind: str) -> None:
    """A graph served by the compile cache: its artifacts from the entry (the graph is not lowered again)."""
    if preserved() and stablehlo is not None:
        from .lowering import as_torchneuron_presents_it
        save_fx_graph(as_torchneuron_presents_it(gm), kind)
        save_stablehlo(stablehlo, kind)
