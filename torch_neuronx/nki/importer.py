"""`import nki` and `import neuronxcc.nki` without AWS's packages: a meta-path finder that resolves them here,
only where no real installation is found.

What happens, exactly:
  - For the top-level names `nki` and `neuronxcc`, the finder first asks Python's own path finder whether a
    package of that name is installed on sys.path. If one is (AWS's `nki` wheel / `neuronx-cc` from AWS's
    package index), the finder steps aside and Python imports AWS's package: nothing of it is shadowed or
    modified. The one exception is PyPI's placeholder packages (`nki 0.0.1`, `neuronx-cc 1.0.post1`, whose
    only content raises "WRONG PACKAGE. Please install the package from Neuron Repository"): they are treated
    as not installed.
  - Otherwise `nki` is torch_neuronx.nki (its language, isa, typing as nki.language, nki.isa, nki.typing)
    and `neuronxcc` a module whose `nki` is torch_neuronx.nki.legacy (neuronxcc.nki.language, .isa, .typing).
    The modules are the same objects under both names (no second copy).
  - Only those names: anything else under `nki.` / `neuronxcc.` (nki.collectives, neuronxcc.nki.kernels,
    neuronxcc.nki.compiler, ...) is an ImportError naming what is emulated.
The finder is installed when torch_neuronx loads (`import torch` does, through its backend entry point) and,
for a process that imports `nki` before torch, by the `torch_neuronx_nki.pth` file the package installs, which
loads only this module (no torch import at interpreter start).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

ALIASES = {
    "nki": "torch_neuronx.nki",
    "nki.language": "torch_neuronx.nki.language",
    "nki.isa": "torch_neuronx.nki.isa",
    "nki.typing": "torch_neuronx.nki.typing",
    "neuronxcc": "torch_neuronx.nki.legacy.neuronxcc",
    "neuronxcc.nki": "torch_neuronx.nki.legacy",
    "neuronxcc.nki.language": "torch_neuronx.nki.legacy.language",
    "neuronxcc.nki.isa": "torch_neuronx.nki.legacy.isa",
    "neuronxcc.nki.typing": "torch_neuronx.nki.typing",
    "neuronxcc.nki.compiler": "torch_neuronx.nki.legacy.compiler",
}
_ROOTS = ("nki", "neuronxcc")
_PLACEHOLDER_MARK = b"WRONG PACKAGE"


def _real_installation(name: str) -> bool:
    """A package `name` that another import finder (sys.path, editable installs, ...) provides, other than
    PyPI's placeholder."""
    spec = None
    for finder in sys.meta_path:
        if type(finder).__name__ == "NkiAliasFinder" or not hasattr(finder, "find_spec"):
            continue
        try:
            spec = finder.find_spec(name, None)
        except Exception:  # a broken finder of someone else's must not break `import nki`
            spec = None
        if spec is not None:
            break
    if spec is None:
        return False
    origin = getattr(spec, "origin", None)
    if origin and origin.endswith(".py"):
        try:
            with open(origin, "rb") as f:
                if _PLACEHOLDER_MARK in f.read(8192):
                    return False
        except OSError:
            pass
    return True


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target
        self._spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self._spec  # the module keeps its own spec (importlib set the alias's)


class NkiAliasFinder(importlib.abc.MetaPathFinder):
    """Resolves `nki` / `neuronxcc` to torch_neuronx's emulation where AWS's packages are not installed."""

    _decided: dict = {}

    def find_spec(self, fullname, path=None, target=None):
        root = fullname.partition(".")[0]
        if root not in _ROOTS:
            return None
        ours = self._decided.get(root)
        if ours is None:
            if fullname != root:  # a submodule of a root imported some other way
                return None
            ours = self._decided[root] = not _real_installation(root)
        if not ours:
            return None
        target_name = ALIASES.get(fullname)
        if target_name is None:
            raise ModuleNotFoundError(
                f"No module named '{fullname}': torch_neuronx emulates {', '.join(sorted(ALIASES))} "
                "(AWS's nki / neuronx-cc packages are not installed; docs/nki.md)", name=fullname)
        is_pkg = fullname in _ROOTS or fullname == "neuronxcc.nki"
        return importlib.util.spec_from_loader(fullname, _AliasLoader(target_name), is_package=is_pkg)


def install() -> None:
    """Put the finder first on sys.meta_path (once). It steps aside for real installations by itself."""
    if not any(type(f).__name__ == "NkiAliasFinder" for f in sys.meta_path):  # also the .pth's copy
        sys.meta_path.insert(0, NkiAliasFinder())


def resolves_here(name: str = "nki") -> bool:
    """Whether `import name` gives torch_neuronx's emulation in this process."""
    ours = NkiAliasFinder._decided.get(name)
    return (not _real_installation(name)) if ours is None else ours
