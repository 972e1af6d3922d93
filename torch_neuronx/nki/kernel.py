"""@nki.jit: a kernel function and its launches (`kernel(...)`, `kernel[grid](...)`).

A launch with torch tensors runs through PyTorch (torch_glue.py: a custom op, so eager, torch.compile and
autograd wrappers see one operation); with NumPy arrays it runs the kernel on the emulated core at once and
returns NumPy arrays (as AWS's nki.simulate). Called from inside a running kernel, a kernel is a sub-kernel:
its function runs inline.

Launch grids: NKI 0.3+ launches `kernel[lnc]` on 1 or 2 logical cores (2 needs NeuronCore-v3/v4 and
NEURON_LOGICAL_NC_CONFIG=2) and `nl.program_id(0)` is the core; beta-1 kernels take any SPMD grid
(`kernel[4, 2]`), whose programs run one after another on one core, as AWS documents for beta 1. A 0.3+ kernel
launched on a larger grid runs the same way, with the FutureWarning AWS's 0.5 deprecation announces.
"""

from __future__ import annotations

import inspect
import os
import warnings

import numpy as np
import torch

from . import interpreter
from .errors import NkiError, fail


class Kernel:
    """An NKI kernel (the result of @nki.jit / @neuronxcc.nki.jit)."""

    def __init__(self, func, legacy: bool = False, **options):
        from . import torch_glue  # noqa: F401  (launches with torch tensors: its custom op, registered now)
        if isinstance(func, Kernel):
            func = func.func
        self.func = func
        self.legacy = legacy
        self.options = options
        self.__name__ = getattr(func, "__name__", "kernel")
        self.__qualname__ = getattr(func, "__qualname__", self.__name__)
        self.__doc__ = getattr(func, "__doc__", None)
        self.__module__ = getattr(func, "__module__", None)
        self.__wrapped__ = func
        self.sign = inspect.signature(func)
        self.arg_names = tuple(self.sign.parameters)
        self.defaults = {n: p.default for n, p in self.sign.parameters.items()
                         if p.default is not inspect.Parameter.empty}
        from .typing import is_mutable_annotation
        self.mutable_params = frozenset(n for n, p in self.sign.parameters.items()
                                        if is_mutable_annotation(p.annotation))
        for n, p in self.sign.parameters.items():
            if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD) and not legacy:
                raise NkiError("err_kernel_signature", f"kernel {self.__name__}: *args / **kwargs parameters are not "
                               "supported (NKI 0.3+)", "name every parameter", loc=_func_loc(func))

    def __getitem__(self, grid) -> "Launch":
        # kernel[2, 2], kernel[(2, 2)], kernel[[2, 2]] (TorchNeuron's examples build the grid as a list), kernel[4]
        if not isinstance(grid, (tuple, list)):
            grid = (grid,)
        return Launch(self, tuple(int(g) for g in grid))

    def __call__(self, *args, **kwargs):
        return Launch(self, ())(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<NKI kernel {self.__name__}{' (beta 1)' if self.legacy else ''}>"

    def bind(self, args, kwargs) -> dict:
        """Arguments by parameter name, defaults filled in (plain Python: Dynamo traces it)."""
        if len(args) > len(self.arg_names):
            raise TypeError(f"kernel {self.__name__} takes {len(self.arg_names)} arguments, {len(args)} given")
        values = dict(zip(self.arg_names, args))
        for k, v in kwargs.items():
            if k not in self.arg_names:
                raise TypeError(f"kernel {self.__name__} got an unexpected keyword argument '{k}'")
            if k in values:
                raise TypeError(f"kernel {self.__name__} got multiple values for argument '{k}'")
            values[k] = v
        out = {}
        for n in self.arg_names:
            if n in values:
                out[n] = values[n]
            elif n in self.defaults:
                out[n] = self.defaults[n]
            else:
                raise TypeError(f"kernel {self.__name__} is missing argument '{n}'")
        return out


def _func_loc(func):
    """(file, line) of a kernel's `def` line (past its decorators)."""
    code = getattr(func, "__code__", None)
    if code is None:
        return None
    import linecache
    line = code.co_firstlineno
    for n in range(line, line + 50):
        if linecache.getline(code.co_filename, n).lstrip().startswith(("def ", "async def ")):
            return (code.co_filename, n)
    return (code.co_filename, line)


class Launch:
    """A kernel with its launch grid: call it with tensors."""

    def __init__(self, kernel: Kernel, grid: tuple):
        self.kernel = kernel
        self.grid = grid

    @property
    def func(self):
        return self.kernel.func

    def __getitem__(self, grid) -> "Launch":
        """wrap_nki(kernel)[grid]: the same kernel on another launch grid."""
        return self.kernel[grid]

    def __call__(self, *args, **kwargs):
        kernel = self.kernel
        run = None if torch.compiler.is_compiling() else interpreter.active()
        if run is not None:  # a sub-kernel: its function runs inline in the calling kernel
            if self.grid:
                fail("err_nested_kernel_with_spmd_grid", f"Calling kernel with spmd grid ({kernel.__name__}"
                     f"{list(self.grid)}) inside another kernel is not supported",
                     f"call {kernel.__name__}(...) without a grid")
            return kernel.func(*args, **kwargs)
        bound = kernel.bind(args, kwargs)
        values = list(bound.values())
        if any(isinstance(v, torch.Tensor) for v in values):
            return torch_launch(kernel, self.grid, bound)
        if any(isinstance(v, np.ndarray) for v in values):
            return simulate_numpy(kernel, self.grid, bound)
        fail("err_kernel_launch", f"kernel {kernel.__name__} was called without tensors",
             "call it with torch tensors (on 'neuron' or 'cpu') or NumPy arrays", loc=_func_loc(kernel.func))


def torch_launch(kernel: Kernel, grid: tuple, bound: dict):
    """A launch with torch tensors (torch_glue.call, which replaces this at import: one custom op)."""
    raise RuntimeError("torch_neuronx.nki.torch_glue is not loaded")


def check_grid(kernel: Kernel, grid: tuple, gen) -> None:
    if kernel.legacy or not grid:
        return
    if len(grid) == 1 and grid[0] <= gen.max_lnc:
        if grid[0] == 2:
            lnc = os.environ.get("NEURON_LOGICAL_NC_CONFIG", "2").strip()
            if lnc != "2":
                fail("err_lnc_launch", f"{kernel.__name__}[2] launches on 2 logical cores but the runtime runs "
                     f"NEURON_LOGICAL_NC_CONFIG={lnc}", "set NEURON_LOGICAL_NC_CONFIG=2, or launch with kernel[1]",
                     loc=_func_loc(kernel.func))
        return
    if len(grid) == 1 and grid[0] > 2:
        warnings.warn(f"{kernel.__name__}[{grid[0]}]: an SPMD launch grid that differs from the LNC degree "
                      f"is deprecated since NKI 0.5 (here its {grid[0]} programs run one after another)",
                      FutureWarning, stacklevel=4)
    elif len(grid) > 1:
        warnings.warn(f"{kernel.__name__}{list(grid)}: multi-dimensional SPMD grids are beta-1 (neuronxcc.nki) "
                      "launches, deprecated in NKI 0.5; the programs run one after another", FutureWarning,
                      stacklevel=4)
    elif grid[0] > gen.max_lnc:
        fail("err_lnc_launch", f"{kernel.__name__}[{grid[0]}]: {gen.name} runs at most {gen.max_lnc} logical core(s)",
             f"launch with kernel[{gen.max_lnc}] or target a newer NeuronCore", loc=_func_loc(kernel.func))


def split_args(kernel: Kernel, bound: dict, is_tensor) -> tuple[dict, dict]:
    tensors = {n: v for n, v in bound.items() if is_tensor(v)}
    constants = {n: v for n, v in bound.items() if not is_tensor(v)}
    return tensors, constants


def simulate_numpy(kernel: Kernel, grid: tuple, bound: dict):
    """Run the kernel on NumPy arrays (in place for parameters it writes); returns NumPy arrays."""
    from . import target
    from .launcher import execute
    gen = target.current()
    check_grid(kernel, grid, gen)
    arrays, constants = split_args(kernel, bound, lambda v: isinstance(v, np.ndarray))
    tensors = {n: torch.from_numpy(np.ascontiguousarray(a)) for n, a in arrays.items()}
    result, _, run = execute(kernel, grid, tensors, constants, preallocated=None, gen=gen)
    from . import cost
    cost.record(kernel.__name__, run.cost, gen.name)
    for n, a in arrays.items():  # a non-contiguous array got a copy: write back what the kernel wrote
        if not a.flags.c_contiguous:
            a[...] = tensors[n].numpy()
    return _to_numpy(result)


def _to_numpy(x):
    if isinstance(x, torch.Tensor):
        return x.float().numpy() if x.dtype == torch.bfloat16 else x.numpy()
    if isinstance(x, tuple):
        return tuple(_to_numpy(v) for v in x)
    return x


def jit(fn=None, mode: str = "auto", **kwargs):
    """@nki.jit (NKI 0.3+): a kernel runnable with torch tensors, NumPy arrays, or as a sub-kernel."""
    if "platform_target" in kwargs:
        raise NkiError("err_jit_platform_target", "nki.jit(platform_target=...) is an error since NKI 0.3",
                       "set NEURON_PLATFORM_TARGET_OVERRIDE=trn1|trn2|trn3 instead", loc=_func_loc(fn) if fn else None)
    if fn is None:
        return lambda f: Kernel(f, legacy=False, **kwargs)
    return Kernel(fn, legacy=False, **kwargs)


def simulate(kernel):
    """nki.simulate(kernel)(*arrays): the kernel on the emulated core, returning NumPy arrays / torch tensors."""
    if isinstance(kernel, Launch):
        return kernel
    if not isinstance(kernel, Kernel):
        kernel = Kernel(kernel)
    return Launch(kernel, ())
