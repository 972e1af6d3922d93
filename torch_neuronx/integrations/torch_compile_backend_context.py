"""torch.compile drops a named backend's `backend_ctx_ctor` (torch 2.13).

The hook. Dynamo lets a backend run every call of the functions compiled with it inside a context of
its own: `torch._dynamo.optimize(backend)` reads `backend.backend_ctx_ctor` and enters a fresh context
from it around each call (`_TorchDynamoContext`'s enter/exit hooks, documented in optimize's docstring),
next to the hook through which torch.compile's own `dynamic=False` takes effect. The neuron backend
keeps Neuron's static-shape rules with it (compile/static_shapes.py): Dynamo's settings for the calls of
neuron-compiled functions only, as `dynamic=False` sets them.

The failure. `torch.compile(fn, backend=...)` wraps every backend except "inductor" in
`_TorchCompileWrapper` (torch/__init__.py), which keeps the backend as `compiler_fn` but not its
`backend_ctx_ctor`; optimize() then finds none. So the hook works for `torch._dynamo.optimize("neuron")`
and is lost for `torch.compile(model, backend="neuron")`.

The shim: `_TorchCompileWrapper.__init__` is wrapped to do what it leaves out, copy the wrapped
backend's `backend_ctx_ctor` onto the wrapper when the backend has one (Dynamo's WrapBackendDebug then
copies it on, as it copies every attribute). A backend without one gets exactly torch's wrapper, so
nothing changes for any other backend. Installed when torch._dynamo is first imported (torch.compile
imports it before it wraps the backend), never by `import torch`.

Upstream fix that removes it: `_TorchCompileWrapper.__init__` copies `backend_ctx_ctor` from the
backend it wraps, as Dynamo's WrapBackendDebug already does (functools.wraps).
"""

from __future__ import annotations

import functools
import warnings

import torch

WRITTEN_FOR = "2.13."


def install() -> bool:
    """Make torch.compile's backend wrapper keep a backend's backend_ctx_ctor; False if not installed."""
    wrapper = torch._TorchCompileWrapper
    original_init = wrapper.__init__
    if getattr(original_init, "_forwards_backend_ctx_ctor", False):
        return True
    if not torch.__version__.startswith(WRITTEN_FOR):
        warnings.warn(f"torch_neuronx: the torch.compile backend-context shim was written for torch {WRITTEN_FOR}x, "
                      f"not {torch.__version__}: not installed, so torch.compile(backend='neuron') runs without "
                      "Neuron's Dynamo settings (torch_neuronx/integrations/torch_compile_backend_context.py)")
        return False

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        backend_ctx_ctor = getattr(self.compiler_fn, "backend_ctx_ctor", None)
        if backend_ctx_ctor is not None:
            self.backend_ctx_ctor = backend_ctx_ctor

    __init__._forwards_backend_ctx_ctor = True  # type: ignore[attr-defined]
    wrapper.__init__ = __init__
    return True
