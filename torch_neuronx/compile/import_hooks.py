"""Run a callback right after a module is imported (or now, if it already is).

`import torch` must stay fast, and importing torch._dynamo costs seconds. So the
plugin does not import Dynamo at load time: it asks to be called when Dynamo
gets imported by someone else (torch.compile does it on first use) and
registers the `neuron` backend and device interface then.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from typing import Callable

_callbacks: dict[str, list[Callable[[], None]]] = {}
_lock = threading.Lock()


def when_imported(module_name: str, callback: Callable[[], None]) -> None:
    """Call `callback()` once `module_name` has finished importing."""
    with _lock:
        if module_name not in sys.modules:
            _callbacks.setdefault(module_name, []).append(callback)
            _install_finder()
            return
    callback()


def _run_callbacks(module_name: str) -> None:
    with _lock:
        callbacks = _callbacks.pop(module_name, [])
    for callback in callbacks:
        callback()


class _PostImportLoader(importlib.abc.Loader):
    """Wraps the real loader; runs the callbacks after the module body has executed."""

    def __init__(self, loader: importlib.abc.Loader, name: str):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        # Put the real loader back first: reloads and pickled specs must not see this wrapper.
        module.__spec__.loader = self._loader
        module.__loader__ = self._loader
        self._loader.exec_module(module)
        _run_callbacks(self._name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _callbacks:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None and spec.loader is not None:
                spec.loader = _PostImportLoader(spec.loader, fullname)
                return spec
        return None


_finder = _PostImportFinder()


def _install_finder() -> None:
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
