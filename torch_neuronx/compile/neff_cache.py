"""The persistent compile cache: compiled neuron graphs ("NEFFs") on disk, shared between processes.

Neuron caches each compiled graph as a NEFF under a directory keyed by a hash
of the graph, so that the next run (or another worker) skips the compiler;
cache misses are the second most common complaint of Neuron users, after
recompiles. This cache keeps Neuron's layout and switches:

    TORCH_NEURONX_NEFF_CACHE_DIR       directory (default /var/tmp/neuron-compile-cache)
    TORCH_NEURONX_NEFF_DISABLE_CACHE=1 neither read nor write it

    <dir>/torch-neuronx-<version>/MODULE_<key>/model.neff

The key hashes everything the compiled code depends on: the host graph (ops,
arguments, input sizes/strides/dtypes, constants), what kind of graph it is
(forward, backward, inference), the Inductor configuration, the versions of
torch, of this plugin's compiler, Python, and the host's vector ISA.

A model.neff holds Inductor's serialized compiled graph (its wrapper source
and metadata, as Inductor's own FX-graph cache stores it) plus the bytes of
every C++ kernel library it loads, so another process needs no C++ compiler
run. The file starts with a magic line and the SHA-256 of its payload; an
entry that is truncated, altered, or unreadable for any reason is reported,
deleted and rebuilt, never used. Kernel libraries are written back into
Inductor's kernel directory (byte-for-byte verified) before the graph loads
them. Writes are atomic (temporary file + rename), so concurrent processes
never see half an entry.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import logging
import os
import pickle
import platform
import re
import shutil
import sys
import time
from typing import Any, Callable, Sequence

import torch
import torch.fx

log = logging.getLogger("torch_neuronx.compile")

CACHE_DIR_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
DISABLE_ENV = "TORCH_NEURONX_NEFF_DISABLE_CACHE"
DEFAULT_CACHE_DIR = "/var/tmp/neuron-compile-cache"
MAGIC = b"TORCHNEURON-NEFF-EMU 1\n"
NEFF_FILE = "model.neff"


class CorruptEntry(Exception):
    pass


def enabled() -> bool:
    return os.environ.get(DISABLE_ENV, "0").strip().lower() not in ("1", "true", "yes", "on")


def cache_root() -> str:
    base = os.path.abspath(os.path.expanduser(os.environ.get(CACHE_DIR_ENV) or DEFAULT_CACHE_DIR))
    from torch_neuronx import __version__
    return os.path.join(base, f"torch-neuronx-{__version__}")


def entry_dir(key: str) -> str:
    return os.path.join(cache_root(), f"MODULE_{key}")


# ---------------------------------------------------------------- keys

@functools.lru_cache(maxsize=1)
def _environment_fingerprint() -> bytes:
    """Everything outside the graph that the compiled code depends on."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa
    from torch_neuronx import __version__
    compiler_dir = os.path.dirname(os.path.abspath(__file__))
    compiler_sources = hashlib.sha256()
    for name in sorted(os.listdir(compiler_dir)):
        if name.endswith(".py"):
            with open(os.path.join(compiler_dir, name), "rb") as f:
                compiler_sources.update(name.encode() + b"\0" + f.read())
    parts = [torch.__version__, __version__, sys.version, platform.machine(), str(pick_vec_isa()),
             compiler_sources.hexdigest()]
    return "\n".join(parts).encode()


def _describe_input(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"T{tuple(x.shape)}{x.stride()}+{x.storage_offset()}:{x.dtype}:{x.device.type}"
    return f"{type(x).__name__}:{x!r}"


class Uncacheable(Exception):
    """The graph cannot be keyed reliably (e.g. a constant whose bytes cannot be read): compile, don't cache."""


def _tensor_digest(h: Any, name: str, value: torch.Tensor) -> None:
    if type(value) not in (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer):
        raise Uncacheable(f"constant {name} is a {type(value).__name__}")
    t = value.detach().cpu().contiguous()
    h.update(name.encode())
    h.update(_describe_input(t).encode())
    h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")


def _constants_digest(gm: torch.fx.GraphModule) -> str:
    """The bytes of the graph's tensor constants: attributes (get_attr) and real tensors in arguments."""
    from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
    h = hashlib.sha256()
    with unset_fake_temporarily():  # real tensors, read outside the compiler's fake-tensor mode
        for node in gm.graph.nodes:
            if node.op == "get_attr":
                owner, _, attr = node.target.rpartition(".")
                value = getattr(gm.get_submodule(owner) if owner else gm, attr, None)
                if isinstance(value, torch.Tensor):
                    _tensor_digest(h, node.target, value)
                else:
                    h.update(node.target.encode() + repr(type(value)).encode())
            for i, a in enumerate(_flat_tensors((node.args, node.kwargs))):
                if isinstance(a, FakeTensor):
                    raise Uncacheable(f"fake tensor in the arguments of {node.name}")
                _tensor_digest(h, f"{node.name}.arg{i}", a)
    return h.hexdigest()


def _flat_tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat_tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _flat_tensors(v)]
    return []


def graph_key(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], kind: str,
              graph_kwargs: dict[str, Any]) -> str:
    from torch._inductor import config as inductor_config
    code = "\n".join(line for line in gm.code.splitlines() if not line.strip().startswith("#"))
    h = hashlib.sha256()
    h.update(_environment_fingerprint())
    h.update(inductor_config.get_hash())
    h.update(kind.encode())
    h.update(repr(tuple(graph_kwargs.get("static_input_idxs") or ())).encode())
    h.update(code.encode())
    h.update("|".join(_describe_input(x) for x in example_inputs).encode())
    h.update(_constants_digest(gm).encode())
    return h.hexdigest()[:40]


# ---------------------------------------------------------------- kernels

_KERNEL_DEF = re.compile(r"^(\w+) = async_compile\.cpp_pybinding\(", re.MULTILINE)


def _kernel_libraries(compiled: Any) -> dict[str, bytes]:
    """The C++ kernel libraries a compiled graph loaded: path relative to Inductor's cache dir -> bytes."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    runner = getattr(compiled, "compiled_fn_runner", None)
    call = getattr(runner, "call", None)
    module_globals = getattr(getattr(call, "__func__", None), "__globals__", None)
    names = _KERNEL_DEF.findall(compiled.source_code or "")
    if names and module_globals is None:
        raise CorruptEntry("cannot find the kernels of the compiled graph")
    root = cache_dir()
    libraries = {}
    for name in names:
        kernel = module_globals.get(name)
        path = getattr(getattr(kernel, "__self__", None), "__file__", None)
        if not path or not os.path.isfile(path):
            raise CorruptEntry(f"kernel {name} has no library file")
        rel = os.path.relpath(path, root)
        if rel.startswith(".."):
            raise CorruptEntry(f"kernel {name} lives outside Inductor's cache dir")
        with open(path, "rb") as f:
            libraries[rel] = f.read()
    return libraries


def _install_kernel_libraries(libraries: dict[str, bytes]) -> None:
    """Put verified kernel bytes where Inductor will look for them (replacing any differing file)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    root = cache_dir()
    for rel, data in libraries.items():
        path = os.path.join(root, rel)
        try:
            with open(path, "rb") as f:
                if f.read() == data:
                    continue
        except OSError:
            pass
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _write_atomic(path, data)


# ---------------------------------------------------------------- files

def _write_atomic(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp.{os.getpid()}.{time.monotonic_ns()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _encode(payload: dict[str, Any]) -> bytes:
    body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    return MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def _decode(data: bytes) -> dict[str, Any]:
    if not data.startswith(MAGIC):
        raise CorruptEntry("bad header")
    header_end = len(MAGIC) + 65
    digest, body = data[len(MAGIC):header_end - 1], data[header_end:]
    if data[header_end - 1:header_end] != b"\n" or hashlib.sha256(body).hexdigest().encode() != digest:
        raise CorruptEntry("checksum mismatch")
    try:
        payload = pickle.loads(body)
    except Exception as e:  # a valid checksum over an unreadable pickle: written by an incompatible version
        raise CorruptEntry(f"unreadable payload ({type(e).__name__})") from e
    if not isinstance(payload, dict) or payload.get("magic") != MAGIC.decode():
        raise CorruptEntry("not a neuron compile cache entry")
    return payload


def _store(key: str, kind: str, compiled: Any) -> None:
    try:
        serializable = copy.copy(compiled)
        serializable.prepare_for_serialization()
        payload = {"magic": MAGIC.decode(), "key": key, "kind": kind, "created": time.time(),
                   "graph": pickle.dumps(serializable, protocol=pickle.HIGHEST_PROTOCOL),
                   "kernels": _kernel_libraries(compiled)}
        data = _encode(payload)
    except Exception as e:  # not serializable: this graph is simply not cached
        log.debug("neuron: graph %s not cached: %s", key, e)
        return
    directory = entry_dir(key)
    os.makedirs(directory, exist_ok=True)
    _write_atomic(os.path.join(directory, NEFF_FILE), data)


def _load(key: str, example_inputs: Sequence[Any], graph_kwargs: dict[str, Any]) -> Any | None:
    path = os.path.join(entry_dir(key), NEFF_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    payload = _decode(data)
    if payload.get("key") != key:
        raise CorruptEntry("entry belongs to another key")
    _install_kernel_libraries(payload["kernels"])
    from torch._inductor.output_code import CompiledFxGraphConstants
    try:
        compiled = pickle.loads(payload["graph"])
        constants = CompiledFxGraphConstants()
        compiled.after_deserialization(constants)
        compiled.post_compile(example_inputs, constants, graph_kwargs)
    except Exception as e:
        _forget_output_strides()
        raise CorruptEntry(f"cannot load the compiled graph ({type(e).__name__}: {e})") from e
    return compiled


def _forget_output_strides() -> None:
    """Undo a half-done post_compile: the rebuild reports the output strides to AOTAutograd again."""
    from torch._guards import TracingContext
    context = TracingContext.try_get()
    if context is not None and context.output_strides:
        context.output_strides.clear()


def _discard(key: str, why: str) -> None:
    from . import stats
    stats.record_corrupt_entry()
    log.warning("neuron: compile cache entry %s is corrupted (%s): deleting it and compiling again.",
                entry_dir(key), why)
    shutil.rmtree(entry_dir(key), ignore_errors=True)


# ---------------------------------------------------------------- entry point

def _with_inner_defaults(graph_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword defaults compile_fx_inner fills in, which post_compile expects."""
    from torch._inductor.utils import BoxedBool
    kwargs = dict(graph_kwargs)
    kwargs.pop("get_decomp_fn", None)
    kwargs.setdefault("cudagraphs", BoxedBool(False))
    kwargs.setdefault("static_input_idxs", ())
    kwargs.setdefault("is_backward", False)
    kwargs.setdefault("is_inference", False)
    kwargs.setdefault("boxed_forward_device_index", None)
    return kwargs


def load_or_build(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], kind: str,
                  graph_kwargs: dict[str, Any], build: Callable[[], Any]) -> tuple[Any, bool]:
    """The compiled graph for `gm`: from the cache if a valid entry exists, else built (and stored)."""
    if not enabled():
        return build(), False
    try:
        key = graph_key(gm, example_inputs, kind, graph_kwargs)
    except Uncacheable as e:
        log.debug("neuron: graph not cached: %s", e)
        return build(), False
    try:
        compiled = _load(key, example_inputs, _with_inner_defaults(graph_kwargs))
    except CorruptEntry as e:
        _discard(key, str(e))
        compiled = None
    if compiled is not None:
        return compiled, True
    compiled = build()
    try:
        _store(key, kind, compiled)
    except OSError as e:  # a read-only or full cache directory must not fail the compile
        log.warning("neuron: cannot write compile cache entry %s: %s", entry_dir(key), e)
    return compiled, False
