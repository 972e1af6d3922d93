"""Loads torch_neuronx._C_distributed, the c10d half of the C++ core.

It is compiled into the same shared library as torch_neuronx._C (setup.py
builds one extension) but exports its own PyInit symbol, so it is a separate
module (PEP 489: several modules in one library, loaded by spec). Loading it
on first use keeps `import torch` from paying for the c10d bindings.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from types import ModuleType

_NAME = "torch_neuronx._C_distributed"


def native() -> ModuleType:
    module = sys.modules.get(_NAME)
    if module is None:
        import torch.distributed  # noqa: F401  (registers the c10d base classes ours derive from)
        from .. import _C
        loader = importlib.machinery.ExtensionFileLoader(_NAME, _C.__file__)
        spec = importlib.util.spec_from_loader(_NAME, loader, origin=_C.__file__)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        sys.modules[_NAME] = module
    return module
