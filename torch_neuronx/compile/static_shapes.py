"""Neuron's static-shape rules for a Dynamo backend: one compiled graph per input shape.

Neuron compiles a graph for one set of input shapes. Dynamo's default
(dynamic=None) recompiles a graph whose input shape changed with symbolic sizes
("automatic dynamic shapes"); a Neuron graph must instead be compiled again for
the new shape. A backend is registered, not told how torch.compile was called,
so the rules are kept in the two places Dynamo gives a backend:

- its context (`backend_ctx_ctor`, entered by Dynamo around every call of a
  function compiled with the backend, before anything is traced): Dynamo's
  settings for those calls only, as torch.compile's own `dynamic=False` sets
  them (no automatic dynamic shapes), plus what Transformers' code needs
  (integrations/transformers_*.py). Nothing is set outside those calls, and
  the settings are the calling thread's only (torch's configuration patches
  are context variables), as torch.compile's own `dynamic=` setting is.
  torch.compile forwards the context through a shim
  (integrations/torch_compile_backend_context.py);
- the backend itself, which Dynamo calls inside that context with each graph:
  `dynamic=True` (Dynamo's settings say so: assume_static_by_default is off)
  and dimensions marked dynamic (symbolic tensor sizes in the graph) are
  rejected with Neuron's message.

Both the neuron backend and the CPU reference backend (compat/cpu_reference.py)
compile under these rules.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from ..integrations import transformers_sliding_window, transformers_warning_once
from . import stats
from .errors import NeuronCompileError

DYNAMIC_REJECTED = (
    "torch.compile(backend='neuron', dynamic=True) is not supported: Neuron compiles each graph for "
    "static input shapes, and every new shape is compiled as a new graph. Leave `dynamic` unset (the "
    "neuron backend compiles as with dynamic=False; torch._dynamo.config.assume_static_by_default must stay "
    "True) and pad inputs to fixed sizes (e.g. sequence length to a multiple of 128, a static KV cache for "
    "generation) so that one compiled graph serves all steps.")

class dynamo_settings:
    """The backend context: Dynamo's settings while a function compiled with Neuron's rules runs.

    Entered by Dynamo around every call, so it is cheap: the settings go through the configuration's
    low-overhead patcher, the one torch.compile's own `dynamic=` goes through (~25 us a call, where
    `config.patch` costs ~90 us).
    """

    def __enter__(self) -> None:
        import torch._dynamo.config as dynamo_config
        compiler_config = torch.compiler.config
        self._reverts = [
            dynamo_config._make_closure_patcher(
                automatic_dynamic_shapes=False,  # as dynamic=False: a new shape is a new static graph
                ignore_logging_functions=transformers_warning_once.ignore_logging_functions(
                    dynamo_config.ignore_logging_functions))(),
            compiler_config._make_closure_patcher(
                dynamic_sources=transformers_sliding_window.dynamic_sources(compiler_config.dynamic_sources))(),
        ]

    def __exit__(self, *exc_info: Any) -> None:
        for revert in reversed(self._reverts):
            revert()


def follows_neuron_rules(backend: Any) -> Any:
    """Mark a Dynamo backend function as compiling under these rules (Dynamo enters its context)."""
    backend.backend_ctx_ctor = dynamo_settings
    return backend


def require_static_shapes(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> None:
    """Called by the backend with each graph: reject dynamic=True and graphs traced with symbolic sizes."""
    import torch._dynamo.config as dynamo_config
    if not dynamo_config.assume_static_by_default:
        raise NeuronCompileError(DYNAMIC_REJECTED)
    from torch.fx.experimental.symbolic_shapes import free_symbols
    names = stats.input_names(gm, len(example_inputs))
    # The traced placeholders carry the symbolic sizes (the example inputs may be the real tensors).
    traced = [n.meta.get("example_value", n.meta.get("val")) for n in gm.graph.nodes if n.op == "placeholder"]
    traced += [None] * (len(example_inputs) - len(traced))
    shape_symbols = set()
    for v in list(traced) + list(example_inputs):
        if isinstance(v, torch.Tensor):
            for s in list(v.shape) + list(v.stride()):
                shape_symbols |= free_symbols(s)
    for name, x, t in zip(names, example_inputs, traced):
        # A symbolic int that no tensor's shape depends on (the sliding window's token count) is a value
        # passed to the graph, not a dynamic shape: symbolic tensor sizes, and ints they use, are rejected.
        value = t if t is not None else x
        if isinstance(value, torch.SymInt) or isinstance(x, torch.SymInt):
            dynamic = bool(free_symbols(value if isinstance(value, torch.SymInt) else x) & shape_symbols)
        else:
            dynamic = isinstance(value, torch.Tensor) and any(
                free_symbols(s) for s in list(value.shape) + list(value.stride()))
        if dynamic:
            raise NeuronCompileError(
                f"torch.compile(backend='neuron') compiles static shapes only, but input {name} was traced with "
                f"symbolic sizes ({tuple(x.shape) if isinstance(x, torch.Tensor) else x}): Neuron compiles one "
                f"graph per input shape. Do not pass dynamic=True or mark dimensions dynamic "
                f"(torch._dynamo.mark_dynamic); pad inputs to fixed sizes (e.g. multiples of 128) instead.")
