"""The version check of the Transformers shims: each was written for one Transformers release."""

from __future__ import annotations

import functools
import importlib.metadata
import warnings

TRANSFORMERS = "5.23."


@functools.lru_cache(maxsize=None)
def transformers_matches(shim: str) -> bool:
    """Is the installed Transformers the release the shim was written for? (Warns once if not.)

    No Transformers installed: False, silently (there is nothing to work around).
    """
    try:
        version = importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return False
    if not version.startswith(TRANSFORMERS):
        warnings.warn(f"torch_neuronx: {shim} was written for Transformers {TRANSFORMERS}x, not {version}: not applied "
                      f"(torch_neuronx/integrations/{shim}.py)")
        return False
    return True
