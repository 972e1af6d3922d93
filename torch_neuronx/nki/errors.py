"""Errors of a kernel, reported the way Neuron's compiler does: at the kernel's source line, naming the rule.

Every check raises `NkiError` with `rule` (AWS's error code where its beta-1 error catalogue has one,
aws-neuron-sdk@1db4d74e nki/api/nki.errors.rst, e.g. "err_num_partition_exceed_arch_limit"), the kernel
line that broke it, and the fix. The message reads

    kernel.py:12: [err_num_partition_exceed_arch_limit] number of partitions 256 exceed architecture
    limitation of 128 in 'ndarray' (x[256, 512] in sbuf).
      12 |     x = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.sbuf)
    Fix: split the partition dimension into tiles of nl.tile_size.pmax (128) rows.
"""

from __future__ import annotations

import linecache
import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = os.path.dirname(os.path.abspath(sys.modules["torch"].__file__))


def _is_internal(filename: str) -> bool:
    return filename.startswith(_PACKAGE_DIR) or filename.startswith(_TORCH_DIR) or filename.startswith("<frozen")


def user_location(depth: int = 1) -> tuple[str, int]:
    """(file, line) of the innermost frame outside this package: the kernel line being executed."""
    f = sys._getframe(depth)
    while f is not None and _is_internal(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return ("<unknown>", 0)
    return (f.f_code.co_filename, f.f_lineno)


def format_location(loc: tuple[str, int]) -> tuple[str, str]:
    filename, line = loc
    text = linecache.getline(filename, line).rstrip() if line else ""
    return f"{os.path.basename(filename)}:{line}", (f"  {line} | {text}" if text else "")


class NkiError(AssertionError):
    """A kernel broke an NKI rule. `rule`: the rule's name; `filename`/`lineno`: the kernel line.

    An AssertionError, as AWS's NKI simulator raises for its checks; torch.compile passes it through unchanged
    (Dynamo re-raises AssertionErrors, where it would wrap other errors of code it traces)."""

    def __init__(self, rule: str, message: str, fix: str = "", loc: tuple[str, int] | None = None):
        self.rule = rule
        self.filename, self.lineno = loc if loc is not None else user_location(2)
        where, source = format_location((self.filename, self.lineno))
        text = f"{where}: [{rule}] {message}"
        if source:
            text += "\n" + source
        if fix:
            text += f"\nFix: {fix}"
        self.detail = message
        super().__init__(text)


class NkiCapacityError(NkiError):
    """Live tiles of a kernel do not fit the NeuronCore's SBUF or PSUM."""


class NkiCapacityWarning(UserWarning):
    """Live tiles of a beta-1 kernel do not fit SBUF or PSUM: its compiler spilled them (slow)."""


def fail(rule: str, message: str, fix: str = "", loc=None):
    raise NkiError(rule, message, fix, loc if loc is not None else user_location(2))
