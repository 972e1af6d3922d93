"""neuronxcc.nki.compiler (beta 1's direct allocation): accepted, addresses ignored.

`nl.ndarray(..., buffer=ncc.sbuf.mod_alloc(base_addr=..., num_free_tiles=...))` and friends place a tensor at an
address the kernel chooses. Here every tensor has storage of its own (results are the same: nothing overlaps),
and capacity is checked on the tiles live at once, as for compiler-allocated tensors (docs/nki.md).
"""

from __future__ import annotations

from .. import memory


class _Placement:
    """A buffer with an address: the memory region it is in is what the emulation uses."""

    def __init__(self, region, **placement):
        self._nki_region = region
        self.placement = placement


class _Memory:
    def __init__(self, region):
        self._region = region

    def mod_alloc(self, *args, **kwargs):
        return _Placement(self._region, **kwargs)

    def alloc(self, func=None, **kwargs):
        return _Placement(self._region, func=func, **kwargs)

    def auto_alloc(self, *args, **kwargs):
        return _Placement(self._region)


sbuf = _Memory(memory.sbuf)
psum = _Memory(memory.psum)


def _passthrough(func=None, **kwargs):
    return func if func is not None else (lambda f: f)


skip_middle_end_transformations = _passthrough
enable_stack_allocator = _passthrough
force_auto_alloc = _passthrough


def no_reorder():
    """`with ncc.no_reorder():` asks the compiler to keep instruction order: the emulation runs in order anyway."""
    import contextlib
    return contextlib.nullcontext()
