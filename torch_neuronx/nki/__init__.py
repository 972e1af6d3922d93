"""NKI (Neuron Kernel Interface) kernels on the emulated NeuronCore.

This package is AWS's `nki` API (NKI 0.3-0.6: `import nki`, `nki.language as nl`, `nki.isa as nisa`,
`@nki.jit`), and, under `legacy/`, the beta-1 `neuronxcc.nki` one. Where AWS's own packages are not
installed, `import nki` and `import neuronxcc.nki` resolve here (importer.py; docs/nki.md says exactly what
happens when they are). Kernels run on whole tiles, are checked against the NeuronCore's rules at the line
that breaks them (checks.py), and report what they would cost (statistics()).

Rooms: target.py (generations), dtypes.py, memory.py (HBM/SBUF/PSUM tensors and their views), operators.py,
engines.py (instruction semantics), checks.py (rules), interpreter.py (a running kernel), cost.py (estimates),
language.py / isa.py / typing.py (the API), kernel.py (@jit, launches), launcher.py (one launch on host
tensors), torch_glue.py (PyTorch: wrap_nki, nki_op, the nki::call_kernel op), importer.py (`import nki`).

The API loads on first use (`import torch` loads torch_neuronx, which only installs the import finder here).
"""

from __future__ import annotations

import importlib

_API = {
    "jit": "kernel", "simulate": "kernel", "Kernel": "kernel",
    "statistics": "cost", "reset_statistics": "cost",
    "NkiError": "errors", "NkiCapacityError": "errors", "NkiCapacityWarning": "errors",
    "wrap_nki": "torch_glue", "nki_op": "torch_glue",
    "tensor": "language",
}
_SUBMODULES = ("language", "isa", "typing", "legacy")

__all__ = sorted(set(_API) | set(_SUBMODULES))


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'nki' (torch_neuronx.nki) has no attribute '{name}'")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), "NkiTensor" if name == "tensor" else name)
    globals()[name] = value
    return value
