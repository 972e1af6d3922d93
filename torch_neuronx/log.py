"""The plugin's log ("torch_neuronx" logger and its children: compile, cache, metrics), configured as
TorchNeuron's from the environment:

  TORCH_NEURONX_LOG_LEVEL  0 errors, 1 warnings (TorchNeuron's default), 2 info, 3 debug
  TORCH_NEURONX_LOG_FILE   append the records there instead of printing them

Records look like TorchNeuron's: "[Neuron] [WARNING] message". Without either variable the logger is left
to the application's logging configuration. Python warnings (the dtype rules, the op-signature advice) stay
warnings, as TorchNeuron's TORCH_WARN messages do.
"""

from __future__ import annotations

import logging
import os
import sys

LEVELS = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}


def configure(env: dict[str, str] | None = None) -> logging.Logger:
    env = os.environ if env is None else env
    logger = logging.getLogger("torch_neuronx")
    raw_level, path = env.get("TORCH_NEURONX_LOG_LEVEL"), env.get("TORCH_NEURONX_LOG_FILE")
    if raw_level is None and not path:
        return logger
    level = logging.WARNING
    if raw_level is not None:
        try:
            level = LEVELS[int(raw_level)]
        except (ValueError, KeyError):
            raise ValueError(f"TORCH_NEURONX_LOG_LEVEL={raw_level!r}: use 0 (errors), 1 (warnings), 2 (info) or "
                             "3 (debug)") from None
    logger.setLevel(level)
    handler = logging.FileHandler(path, mode="a") if path else logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("[Neuron] [%(levelname)s] %(message)s"))
    for old in [h for h in logger.handlers if getattr(h, "_torch_neuronx", False)]:
        logger.removeHandler(old)
    handler._torch_neuronx = True
    logger.addHandler(handler)
    logger.propagate = False
    return logger
