"""NKI (Neuron Kernel Interface) kernels on the emulated NeuronCore.

This package is AWS's `nki` API (NKI 0.3-0.6: `import nki`, `nki.language as nl`, `nki.isa as nisa`,
`@nki.jit`), and, under `legacy/`, the beta-1 `neuronxcc.nki` one. Where AWS's own packages are not
installed, `import nki` and `import neuronxcc.nki` resolve here (importer.py; docs/nki.md says exactly what
happens when they are). Kernels run on whole tiles, are checked against the NeuronCore's rules at the line
that breaks them (checks.py), and report what they would cost (statistics()).

Rooms: target.py (generations), dtypes.py, memory.py (HBM/SBUF/PSUM tensors and views), operators.py,
engines.py (instruction semantics), checks.py (rules), interpreter.py (a running kernel), cost.py (estimates),
language.py / isa.py / typing.py (the API), kernel.py (@jit, launches), launcher.py (one launch on host
tensors), torch_glue.py (PyTorch: wrap_nki, nki_op, the nki::call_kernel op), importer.py (`import nki`).
"""

from __future__ import annotations

from . import isa, language, typing  # noqa: F401
from .cost import reset_statistics, statistics  # noqa: F401
from .errors import NkiCapacityError, NkiCapacityWarning, NkiError  # noqa: F401
from .kernel import Kernel, jit, simulate  # noqa: F401
from .torch_glue import nki_op, wrap_nki  # noqa: F401

# NKI 0.3+ spells the tensor class and the dtypes at package level too
from .language import NkiTensor as tensor  # noqa: F401,E402

__all__ = ["jit", "simulate", "language", "isa", "typing", "Kernel", "NkiError", "NkiCapacityError", "statistics",
           "reset_statistics", "wrap_nki", "nki_op"]
