"""The persistent compile cache: compiled neuron graphs ("NEFFs") on disk, shared between processes.

Neuron caches each compiled graph as a NEFF under a directory keyed by a hash
of the graph, so that the next run (or another worker) skips the compiler;
cache misses are the second most common complaint of Neuron users, after
recompiles. This cache keeps Neuron's layout and switches:

    TORCH_NEURONX_NEFF_CACHE_DIR        directory (default: per user, $XDG_CACHE_HOME or
                                        ~/.cache, then torch-neuronx/neff-cache)
    TORCH_NEURONX_DISABLE_NEFF_CACHE=1  neither read nor write it
    TORCH_NEURONX_NEFF_CACHE_KEY_FILE   a shared team cache: entries authenticated with this key

    <dir>/torch-neuronx-<version>/MODULE_<key>/model.neff

The key hashes everything the compiled code depends on: the host graph (ops,
arguments, input sizes/strides/dtypes, constants), what kind of graph it is
(forward, backward, inference), the Inductor configuration, the versions of
torch and Python, the host's vector ISA, and the plugin code that shapes the
generated code (codegen_fingerprint: not the plugin's version or its other files;
the cache directory is per plugin version already).

A model.neff holds Inductor's serialized compiled graph (its wrapper source
and metadata, as Inductor's own FX-graph cache stores it) plus the bytes of
every C++ kernel library it loads, so another process needs no C++ compiler
run. Loading an entry runs code (unpickling, loading libraries), so an entry
is read only when it is trusted (cache_trust.py): in a private cache, the
directories and the file belong to the user and nobody else can write them;
in a shared cache, its HMAC under the team's key verifies, before anything is
deserialized. An untrusted directory or entry is named in a warning and not
read; the graph is compiled again. Behind the header, a digest over the
payload (SHA-256, or the HMAC) finds truncated or altered entries, which are
reported, deleted and rebuilt, never used. Kernel libraries and the wrapper
module are written back into Inductor's kernel directory (itself checked
private) before the graph loads them. Writes are atomic (temporary file +
rename), so concurrent processes never see half an entry.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import logging
import os
import pickle
import platform
import re
import shutil
import stat
import sys
import time
from typing import Any, Callable, Sequence

import torch
import torch.fx

from . import cache_trust
from .cache_trust import Untrusted

log = logging.getLogger("torch_neuronx.compile")

CACHE_DIR_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
KEY_FILE_ENV = "TORCH_NEURONX_NEFF_CACHE_KEY_FILE"
DISABLE_ENV = "TORCH_NEURONX_DISABLE_NEFF_CACHE"  # the real TorchNeuron's name
DEPRECATED_DISABLE_ENV = "TORCH_NEURONX_NEFF_DISABLE_CACHE"  # this plugin's earlier name, still accepted
MAGIC = b"TORCHNEURON-NEFF-EMU 2\n"
NEFF_FILE = "model.neff"


class CorruptEntry(Exception):
    pass


_warned: set[str] = set()


def _warn_once(message: str, *args: Any) -> None:
    text = message % args
    if text not in _warned:
        _warned.add(text)
        log.warning(text)


def enabled() -> bool:
    value = os.environ.get(DISABLE_ENV)
    if value is None and os.environ.get(DEPRECATED_DISABLE_ENV) is not None:
        _warn_once("neuron: %s is deprecated; use %s (the Neuron SDK's name).", DEPRECATED_DISABLE_ENV, DISABLE_ENV)
        value = os.environ[DEPRECATED_DISABLE_ENV]
    return (value or "0").strip().lower() not in ("1", "true", "yes", "on")


def default_cache_dir() -> str:
    """Per user: only its owner can write it, so only its owner's entries are found there."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torch-neuronx", "neff-cache")


def cache_base() -> str:
    return os.path.abspath(os.path.expanduser(os.environ.get(CACHE_DIR_ENV) or default_cache_dir()))


def _version_dir() -> str:
    from torch_neuronx import __version__
    return f"torch-neuronx-{__version__}"


def cache_root() -> str:
    return os.path.join(cache_base(), _version_dir())


def entry_dir(key: str) -> str:
    return os.path.join(cache_root(), f"MODULE_{key}")


# ---------------------------------------------------------------- keys

# The plugin's part in what a cache entry holds. Only the code that shapes the generated code is hashed,
# so that editing any other plugin file (stats, launch, the cache's trust checks) keeps every entry valid:
# host_graph.py rewrites the graph Inductor compiles, including the fake-tensor metadata Inductor's code
# generation reads (the rewritten graph's code is hashed per entry, its metadata is not).
CODEGEN_SOURCES = ("host_graph.py",)
# Bump when anything else changes what an entry holds or how compiled code is generated: the arguments
# compiler.py gives Inductor's inner compiler, the INDUCTOR_CONFIG in backend.py that the Inductor
# config hash does not cover, the payload layout below (MAGIC versions the header only).
CODEGEN_VERSION = 2


def codegen_fingerprint(directory: str = os.path.dirname(os.path.abspath(__file__))) -> str:
    """CODEGEN_VERSION and the sources in CODEGEN_SOURCES (in `directory`, this package by default)."""
    h = hashlib.sha256(f"codegen {CODEGEN_VERSION}\n".encode())
    for name in CODEGEN_SOURCES:
        with open(os.path.join(directory, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def _environment_fingerprint() -> bytes:
    """Everything outside the graph that the compiled code depends on."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa
    parts = [torch.__version__, sys.version, platform.machine(), str(pick_vec_isa()), codegen_fingerprint()]
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
              graph_kwargs: dict[str, Any], lowering: str = "") -> str:
    """`lowering`: the lowering stage's fingerprint when the entry holds the graph's StableHLO too."""
    from torch._inductor import config as inductor_config
    code = "\n".join(line for line in gm.code.splitlines() if not line.strip().startswith("#"))
    h = hashlib.sha256()
    h.update(_environment_fingerprint())
    h.update(f"lowering {lowering}\n".encode())
    h.update(inductor_config.get_hash())
    h.update(kind.encode())
    h.update(repr(tuple(graph_kwargs.get("static_input_idxs") or ())).encode())
    h.update(code.encode())
    h.update("|".join(_describe_input(x) for x in example_inputs).encode())
    h.update(_constants_digest(gm).encode())
    return h.hexdigest()[:40]


# ---------------------------------------------------------------- kernels

_KERNEL_DEF = re.compile(r"^(\w+) = async_compile\.cpp_pybinding\(", re.MULTILINE)


def inductor_dir() -> str:
    """Inductor's kernel directory, created 0700 if missing, once checked private (raises Untrusted).

    Inductor loads any kernel library or wrapper module it finds there (a file's name is the hash of
    what it should contain, never checked), so the directory must be one only this user can write.
    """
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir as inductor_default
    return cache_trust.private_dir(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or inductor_default())


def _inductor_relpath(path: str) -> str:
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(cache_dir()))
    if rel.startswith(".."):
        raise CorruptEntry(f"{path} lives outside Inductor's cache dir")
    return rel


def _kernel_libraries(compiled: Any) -> dict[str, bytes]:
    """The C++ kernel libraries a compiled graph loaded: path relative to Inductor's cache dir -> bytes."""
    runner = getattr(compiled, "compiled_fn_runner", None)
    call = getattr(runner, "call", None)
    module_globals = getattr(getattr(call, "__func__", None), "__globals__", None)
    names = _KERNEL_DEF.findall(compiled.source_code or "")
    if names and module_globals is None:
        raise CorruptEntry("cannot find the kernels of the compiled graph")
    libraries = {}
    for name in names:
        kernel = module_globals.get(name)
        path = getattr(getattr(kernel, "__self__", None), "__file__", None)
        if not path or not os.path.isfile(path):
            raise CorruptEntry(f"kernel {name} has no library file")
        with open(path, "rb") as f:
            libraries[_inductor_relpath(path)] = f.read()
    return libraries


def _install_loaded_files(compiled: Any, libraries: dict[str, bytes]) -> None:
    """Put the entry's kernel libraries and wrapper module where Inductor will load them from.

    A file already there is kept only if it is this user's and holds exactly the entry's bytes;
    otherwise it is replaced, so Inductor loads what the trusted entry holds and nothing else.
    """
    from torch._inductor.codecache import get_path
    root = inductor_dir()
    for rel, data in libraries.items():
        cache_trust.install_private_file(root, rel, data)
    wrapper = get_path(compiled.cache_key, "py")[2]  # where after_deserialization loads the wrapper from
    cache_trust.install_private_file(root, _inductor_relpath(wrapper), compiled.source_code.encode("utf-8"))


# ---------------------------------------------------------------- the store

@dataclasses.dataclass(frozen=True)
class Store:
    """The cache directory of this process, once trusted: private (key None) or shared (a team key)."""
    root: str
    key: bytes | None

    @property
    def shared(self) -> bool:
        return self.key is not None

    def entry(self, key: str) -> str:
        return os.path.join(self.root, f"MODULE_{key}", NEFF_FILE)

    def read(self, key: str) -> bytes | None:
        """The entry's bytes, None if absent; raises Untrusted for a private entry that is not the user's."""
        path = self.entry(key)
        if self.shared:  # no file is trusted for who wrote it: the MAC decides, before any decoding
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except FileNotFoundError:
                return None
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    raise Untrusted(path, "is not a regular file")
                return f.read()
        directory = os.path.dirname(path)
        try:
            st = os.lstat(directory)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            raise Untrusted(directory, "is not a directory")
        cache_trust.check_owned_by_me(directory, st)
        return cache_trust.read_private_file(path)

    def write(self, key: str, data: bytes) -> None:
        directory = os.path.dirname(self.entry(key))
        if self.shared:
            _shared_dir(directory)
            cache_trust.write_file(self.entry(key), data, mode=0o640)
            return
        try:
            cache_trust.private_subdir(self.root, os.path.basename(directory))
        except Untrusted:  # not the user's: replaced by a directory that is
            shutil.rmtree(directory)
            cache_trust.private_subdir(self.root, os.path.basename(directory))
        cache_trust.write_file(self.entry(key), data, mode=0o600)

    def discard(self, key: str) -> None:
        if self.shared:  # the entry only: its directory may be another team member's
            try:
                os.unlink(self.entry(key))
            except OSError:
                pass
        else:
            shutil.rmtree(os.path.dirname(self.entry(key)), ignore_errors=True)


def _shared_dir(path: str) -> None:
    """A directory of the shared cache: the team (group) may add entries; nobody else may read them."""
    try:
        os.mkdir(path)
    except FileExistsError:
        return
    mode = stat.S_IMODE(os.stat(path).st_mode)  # keeps a setgid bit inherited from the team's directory
    os.chmod(path, (mode | 0o770) & ~0o007)


def open_store() -> Store | None:
    """The trusted cache directory, or None (with a warning naming it and why) if there is none."""
    base = cache_base()
    key_file = os.environ.get(KEY_FILE_ENV)
    try:
        if key_file:
            key = cache_trust.read_key(key_file)
            root = os.path.join(base, _version_dir())
            os.makedirs(base, exist_ok=True)
            _shared_dir(root)
            return Store(root, key)
        base = cache_trust.private_dir(base)
        return Store(cache_trust.private_subdir(base, _version_dir()), None)
    except Untrusted as e:
        if key_file:
            _warn_once("neuron: not using the shared compile cache %s: its key file %s. Compiling without the "
                       "cache. The key file must hold at least %d random bytes, readable by its owner and "
                       "group only (docs/compile.md, 'The compile cache').", base, e, cache_trust.MIN_KEY_BYTES)
        else:
            _warn_once("neuron: not using the compile cache directory %s: %s. Loading a cache entry runs code, so "
                       "the cache reads only directories that nobody but you can write. Compiling without the "
                       "cache. Use a directory of your own (unset %s for the per-user default %s), or for a "
                       "cache shared by a team set %s (docs/compile.md, 'The compile cache').", base, e,
                       CACHE_DIR_ENV, default_cache_dir(), KEY_FILE_ENV)
    except OSError as e:
        _warn_once("neuron: cannot use the compile cache directory %s: %s. Compiling without the cache.", base, e)
    return None


# ---------------------------------------------------------------- entries

def _encode(payload: dict[str, Any], key: str, store_key: bytes | None) -> bytes:
    body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    scheme, digest = cache_trust.digest(store_key, key.encode(), body)
    return MAGIC + f"{scheme} {digest}\n".encode() + body


class Unauthenticated(Exception):
    pass


def _decode(data: bytes, key: str, store_key: bytes | None) -> dict[str, Any]:
    """The payload of an entry, unpickled only after its digest (the HMAC in a shared cache) verified."""
    if not data.startswith(MAGIC):
        raise (Unauthenticated if store_key is not None else CorruptEntry)("bad header")
    header_end = data.find(b"\n", len(MAGIC))
    header = data[len(MAGIC):header_end].decode("ascii", "replace").split(" ") if header_end > 0 else []
    body = data[header_end + 1:]
    if len(header) != 2 or not cache_trust.digest_matches(store_key, key.encode(), body, *header):
        if store_key is not None:
            raise Unauthenticated("altered, truncated, or written with another key")
        raise CorruptEntry("checksum mismatch")
    try:
        payload = pickle.loads(body)
    except Exception as e:  # a valid digest over an unreadable pickle: written by an incompatible version
        raise CorruptEntry(f"unreadable payload ({type(e).__name__})") from e
    if not isinstance(payload, dict) or payload.get("magic") != MAGIC.decode() or payload.get("key") != key:
        raise CorruptEntry("not a neuron compile cache entry for this graph")
    return payload


def _store(store: Store, key: str, kind: str, compiled: Any, stablehlo: str | None) -> None:
    try:
        serializable = copy.copy(compiled)
        serializable.prepare_for_serialization()
        payload = {"magic": MAGIC.decode(), "key": key, "kind": kind, "created": time.time(),
                   "graph": pickle.dumps(serializable, protocol=pickle.HIGHEST_PROTOCOL),
                   "kernels": _kernel_libraries(compiled), "stablehlo": stablehlo}
        data = _encode(payload, key, store.key)
    except Exception as e:  # not serializable: this graph is simply not cached
        log.debug("neuron: graph %s not cached: %s", key, e)
        return
    store.write(key, data)


def _load(store: Store, key: str, example_inputs: Sequence[Any], graph_kwargs: dict[str, Any],
          lowered: bool) -> tuple[Any, str | None] | None:
    data = store.read(key)
    if data is None:
        return None
    payload = _decode(data, key, store.key)
    stablehlo = payload.get("stablehlo")
    if lowered and not isinstance(stablehlo, str):
        raise CorruptEntry("the entry lacks the graph's StableHLO")
    from torch._inductor.output_code import CompiledFxGraphConstants
    try:
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        with unset_fake_temporarily():  # tensor constants unpickled inside the compiler's fake mode would be fakes
            compiled = pickle.loads(payload["graph"])
        _install_loaded_files(compiled, payload["kernels"])
        constants = CompiledFxGraphConstants()
        compiled.after_deserialization(constants)
        compiled.post_compile(example_inputs, constants, graph_kwargs)
    except Untrusted:
        raise
    except Exception as e:
        _forget_output_strides()
        raise CorruptEntry(f"cannot load the compiled graph ({type(e).__name__}: {e})") from e
    return compiled, stablehlo


def _forget_output_strides() -> None:
    """Undo a half-done post_compile: the rebuild reports the output strides to AOTAutograd again."""
    from torch._guards import TracingContext
    context = TracingContext.try_get()
    if context is not None and context.output_strides:
        context.output_strides.clear()


def _discard(store: Store, key: str, why: str) -> None:
    from . import stats
    stats.record_corrupt_entry()
    log.warning("neuron: compile cache entry %s is corrupted (%s): deleting it and compiling again.",
                store.entry(key), why)
    store.discard(key)


def _reject(store: Store, key: str, why: str) -> None:
    from . import stats
    stats.record_rejected_entry()
    log.warning("neuron: not reading compile cache entry %s: %s. Loading an entry runs code, so the cache reads "
                "only what it can trust; compiling the graph again.", store.entry(key), why)


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
                  graph_kwargs: dict[str, Any], build: Callable[[], Any],
                  lower: Callable[[], str] | None = None, lowering: str = "") -> tuple[Any, str | None, bool]:
    """(compiled graph, its StableHLO, cache hit): from the cache if a trusted, valid entry exists, else
    lowered (`lower`, when given: the lowering stage, whose fingerprint is `lowering`), built and stored.

    The lowering runs before the build: a graph that does not lower fails before Inductor compiles it.
    """
    def lower_and_build() -> tuple[Any, str | None]:
        stablehlo = lower() if lower is not None else None
        return build(), stablehlo

    if not enabled():
        return (*lower_and_build(), False)
    store = open_store()
    if store is None:
        return (*lower_and_build(), False)
    try:
        key = graph_key(gm, example_inputs, kind, graph_kwargs, lowering if lower is not None else "")
    except Uncacheable as e:
        log.debug("neuron: graph not cached: %s", e)
        return (*lower_and_build(), False)
    loaded = None
    try:
        loaded = _load(store, key, example_inputs, _with_inner_defaults(graph_kwargs), lower is not None)
    except Untrusted as e:
        _reject(store, key, str(e))
    except Unauthenticated as e:
        _reject(store, key, f"it fails authentication with the key in {os.environ.get(KEY_FILE_ENV)} ({e})")
        store.discard(key)
    except CorruptEntry as e:
        _discard(store, key, str(e))
    if loaded is not None:
        return (*loaded, True)
    compiled, stablehlo = lower_and_build()
    try:
        _store(store, key, kind, compiled, stablehlo)
    except (OSError, Untrusted) as e:  # a read-only or full cache directory must not fail the compile
        log.warning("neuron: cannot write compile cache entry %s: %s", store.entry(key), e)
    return compiled, stablehlo, False
