"""This machine's paths out of what a report publishes.

Graph-break reasons, errors and tracebacks name files by absolute path
(`/home/me/venv/lib/python3.11/site-packages/transformers/models/x/modeling_x.py:80`). A checked-in
report should read the same from any machine, and say nothing about the one it ran on: an installed
package's file is named from its package (`transformers/models/x/modeling_x.py:80`), a file of this
checkout from the checkout's root (`torch_neuronx/compile/launch.py:96`), the standard library's
from its version (`python3.11/logging/__init__.py:1`).
"""

from __future__ import annotations

import functools
import os
import re
import sysconfig

# an absolute path up to and including an installation's package directory
_PACKAGES = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][^\s'\"():,;\[\]]+)*?[/\\](?:site|dist)-packages[/\\]")


@functools.lru_cache(maxsize=None)
def _prefixes() -> tuple[tuple[str, str], ...]:
    """(absolute prefix, what replaces it), longest first."""
    import torch_neuronx
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(torch_neuronx.__file__)))
    stdlib = sysconfig.get_paths()["stdlib"]
    pairs = {checkout + os.sep: "", stdlib + os.sep: os.path.basename(stdlib) + "/"}
    return tuple(sorted(pairs.items(), key=lambda kv: -len(kv[0])))


def relative_paths(text: str) -> str:
    """`text` with installation and checkout paths made relative (see the module's docstring)."""
    if os.sep not in text:
        return text
    text = _PACKAGES.sub("", text)
    for prefix, replacement in _prefixes():
        text = text.replace(prefix, replacement)
    return text


def relative_paths_in(value):
    """A copy of a JSON-like value (dicts, lists, strings) with relative_paths applied to every string."""
    if isinstance(value, str):
        return relative_paths(value)
    if isinstance(value, dict):
        return {k: relative_paths_in(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [relative_paths_in(v) for v in value]
    return value
