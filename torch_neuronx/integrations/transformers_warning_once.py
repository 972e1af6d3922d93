"""Transformers' `logger.warning_once` breaks compiled graphs (Transformers 5.23).

The failure. Dynamo cannot trace calls into `logging`, so each one is a graph break: the graph is cut
in two and the code between runs eagerly. Transformers adds `warning_once` to `logging.Logger` (an
lru_cache'd function, so Dynamo's own list of logging methods does not know it) and calls it in the
loss function of every causal LM whose class name does not name its loss type (GPT-2, BERT, BigBird,
...): compiled training of those models is split at the loss.

The shim: Dynamo skips the call instead (`torch._dynamo.config.ignore_logging_functions`), only in
calls of functions compiled with backend="neuron" (the backend's Dynamo settings,
compile/static_shapes.py); the warning is then printed by eager runs only, which is what "once" is for.

Upstream fix that removes it: Transformers registers `warning_once` (and `info_once`) with
`torch._dynamo.config.ignore_logging_functions` itself where it defines them, or Dynamo treats
functions that Logger subclasses add as logging methods.
"""

from __future__ import annotations

import logging

from .written_for import transformers_matches


def ignore_logging_functions(current: set) -> set:
    """`torch._dynamo.config.ignore_logging_functions` with Transformers' warning_once (once imported)."""
    warning_once = getattr(logging.Logger, "warning_once", None)  # added by `import transformers`
    if warning_once is None or warning_once in current or not transformers_matches("transformers_warning_once"):
        return current
    return current | {warning_once}
