"""Library logging calls that should not break a neuron graph.

Dynamo cannot trace calls into `logging`, so each one is a graph break: the
graph is cut in two and the code between runs eagerly. Transformers'
`logger.warning_once` (a method it adds to logging.Logger) sits in the loss
function of every causal LM whose class name does not name its loss type
(GPT-2, BERT, BigBird, ...), so compiled training of those models is split at
the loss. Dynamo can skip such calls instead (`ignore_logging_functions`);
the warning is then printed by eager runs only, which is what "once" is for.
"""

from __future__ import annotations

import logging


def ignore_library_logging() -> None:
    import torch._dynamo.config as dynamo_config
    warning_once = getattr(logging.Logger, "warning_once", None)  # present once Transformers is imported
    if warning_once is not None:
        dynamo_config.ignore_logging_functions.add(warning_once)
