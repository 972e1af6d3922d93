"""Training checkpoints that are whole or absent: torch.distributed.checkpoint (DCP) saves, committed atomically.

DCP writes every rank's shards and, last, a `.metadata` file. A job killed while saving, or a save that
overwrites a checkpoint in place, leaves a directory that may look loadable and is not. Here:

* every save goes to `<root>/step_<N>.partial/`;
* once `dcp.save` has returned (every rank's shards written and fsynced, `.metadata` written), rank 0 writes
  a manifest, `COMMITTED` (the step, the world size and every file with its size), fsyncs it and renames the
  directory to `<root>/step_<N>/`. A rename within one file system is atomic, so a reader sees no
  `step_<N>` or a whole one; then every rank leaves `save` together, so a returned `save` means committed;
* loading takes the newest `step_<N>` whose manifest matches the files on disk. `.partial` directories are
  never read; the next save removes them.

`root` must be one directory every rank can see (a shared file system across hosts), as DCP itself requires.
Nothing here depends on the device: the same calls checkpoint CPU, neuron or CUDA tensors, under any mesh.

    from torch_neuronx.distributed import checkpoint
    step = checkpoint.load(state, root)            # newest committed checkpoint, or None: start from 0
    ...
    checkpoint.save(state, root, step)             # collective: every rank calls it

`state` is what `dcp.save`/`dcp.load` take: a dict of tensors, DTensors and `Stateful` objects (see
docs/fault-tolerance.md for a model + optimizer that reshards across meshes).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings

import torch.distributed as dist
import torch.distributed.checkpoint as dcp

MANIFEST = "COMMITTED"
_STEP_DIR = re.compile(r"^step_(\d+)$")


class CheckpointWarning(UserWarning):
    """A committed checkpoint failed verification and was skipped."""


def step_dir(root: str | os.PathLike, step: int) -> str:
    """The directory of the committed checkpoint of `step` (it exists only once committed)."""
    return os.path.join(os.fspath(root), f"step_{step:08d}")


def save(state: dict, root: str | os.PathLike, step: int, *, storage_writer=None, keep: int | None = 2) -> str:
    """Save `state` as the checkpoint of `step` under `root`; collective (every rank calls it).

    Returns the committed directory, `step_dir(root, step)`. `storage_writer` is passed to `dcp.save` (default:
    DCP's FileSystemWriter); its path is replaced by this checkpoint's. The newest `keep` committed checkpoints
    are kept (None keeps all): with 2 or more, a checkpoint that later fails verification still has a
    predecessor to fall back on.
    """
    if keep is not None and keep < 1:
        raise ValueError(f"keep={keep}: keep at least the checkpoint just saved (keep >= 1, or None for all)")
    final = step_dir(root, step)
    write(state, final, storage_writer=storage_writer, manifest={"step": step})
    if _rank() == 0:
        _prune(root, keep)
    _barrier()
    return final


def write(state: dict, path: str | os.PathLike, *, storage_writer=None, manifest: dict | None = None) -> None:
    """Write `state` with DCP to the directory `path`, which then exists whole or not at all; collective.

    The data goes to `<path>.partial`, renamed to `path` once complete (an existing `path` is replaced).
    `manifest` adds entries to the COMMITTED manifest. Every rank returns once `path` is committed.
    """
    final = os.fspath(path)
    partial = final + ".partial"
    if _rank() == 0:
        os.makedirs(os.path.dirname(final) or ".", exist_ok=True)
        shutil.rmtree(partial, ignore_errors=True)  # left by an attempt killed while writing it
    _barrier()  # nobody writes into `partial` before rank 0 emptied it
    dcp.save(state, checkpoint_id=partial, storage_writer=storage_writer)
    # dcp.save returns on a rank only after the coordinator wrote `.metadata`, which it does only after every
    # rank reported its shards written: the directory is complete here, on every rank.
    if _rank() == 0:
        _commit(partial, final, manifest or {})
    _barrier()  # a rank that returns knows the checkpoint is committed


def latest(root: str | os.PathLike) -> tuple[int, str] | None:
    """The newest committed checkpoint under `root` that verifies: (step, directory), or None.

    Decided by rank 0 and shared with every rank when a process group exists, so all ranks load the same one.
    """
    found = _newest_verified(root) if _rank() == 0 else None
    if _distributed():
        box = [found]
        dist.broadcast_object_list(box, src=0)
        found = box[0]
    return found


def load(state: dict, root: str | os.PathLike, *, storage_reader=None) -> int | None:
    """Load the newest committed checkpoint under `root` into `state` (in place, as `dcp.load`).

    Returns its step, or None when there is none yet (nothing is loaded: start from scratch). Works in one
    process without a process group too (e.g. to read a checkpoint of a distributed run on a plain CPU host).
    """
    found = latest(root)
    if found is None:
        return None
    step, path = found
    dcp.load(state, checkpoint_id=path, storage_reader=storage_reader)
    return step


def verify(path: str | os.PathLike) -> str | None:
    """Why the committed checkpoint at `path` cannot be loaded, or None if its files match its manifest."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        return "it was never written"
    try:
        with open(os.path.join(path, MANIFEST)) as f:
            manifest = json.load(f)
        files = manifest["files"]
    except FileNotFoundError:
        return f"no {MANIFEST} manifest"
    except (ValueError, KeyError, TypeError) as e:
        return f"unreadable {MANIFEST} manifest ({e})"
    if ".metadata" not in files:
        return "the manifest lists no DCP .metadata"
    for name, size in files.items():
        full = os.path.join(path, name)
        if not os.path.isfile(full):
            return f"{name} is missing"
        if os.path.getsize(full) != size:
            return f"{name} has {os.path.getsize(full)} bytes, the manifest says {size}"
    return None


# ---- internals -------------------------------------------------------------------------------------------------

def _commit(partial: str, final: str, extra: dict) -> None:
    files = {}
    for name in sorted(os.listdir(partial)):
        full = os.path.join(partial, name)
        if os.path.isfile(full):
            files[name] = os.path.getsize(full)
    if ".metadata" not in files:
        raise RuntimeError(f"dcp.save returned but {partial} has no .metadata: refusing to commit it")
    manifest = {**extra, "world_size": dist.get_world_size() if _distributed() else 1, "files": files}
    tmp = os.path.join(partial, MANIFEST + ".tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(partial, MANIFEST))
    _fsync_dir(partial)
    if os.path.exists(final):
        # Saving over a committed checkpoint happens only after resuming from an older one (the newer one failed
        # verification). Killed between these two lines, the older checkpoints remain.
        shutil.rmtree(final)
    os.rename(partial, final)
    _fsync_dir(os.path.dirname(final))


def _prune(root: str | os.PathLike, keep: int | None) -> None:
    root = os.fspath(root)
    for name in os.listdir(root):
        if name.startswith("step_") and name.endswith(".partial"):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)  # torn by a killed save: never loaded
    if keep is not None:
        for _, path in _committed(root)[:-keep]:
            shutil.rmtree(path, ignore_errors=True)


def _committed(root: str | os.PathLike) -> list[tuple[int, str]]:
    """The `step_<N>` directories under root, oldest first (not yet verified)."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        return []
    steps = []
    for name in os.listdir(root):
        m = _STEP_DIR.match(name)
        if m and os.path.isdir(os.path.join(root, name)):
            steps.append((int(m.group(1)), os.path.join(root, name)))
    return sorted(steps)


def _newest_verified(root: str | os.PathLike) -> tuple[int, str] | None:
    for step, path in reversed(_committed(root)):
        problem = verify(path)
        if problem is None:
            return step, path
        warnings.warn(f"checkpoint {path} is damaged ({problem}); it is skipped and the one before it is "
                      f"loaded. Delete {path} once you have looked at it.", CheckpointWarning, stacklevel=3)
    return None


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def _rank() -> int:
    return dist.get_rank() if _distributed() else 0


def _barrier() -> None:
    if _distributed():
        dist.barrier()
