"""One launch of a kernel on host (or meta) tensors: its HBM parameters, its programs, what it returns.

Shared by the PyTorch glue (host aliases of device tensors, and meta tensors for the dry run that infers
shapes), and by nki.simulate / NumPy launches.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import dtypes as dt
from . import interpreter
from .errors import fail
from .kernel import Kernel, check_grid, _func_loc
from .memory import Allocation, NkiTensor, shared_hbm


@dataclass(frozen=True)
class ResultSpec:
    """What a launch returned: per returned tensor ("param", name) or ("new", slot); `single`: not a tuple."""

    items: tuple
    single: bool
    new_outputs: tuple       # (shape, torch dtype) of each new shared_hbm tensor, by slot
    written_params: tuple    # names of parameters the kernel wrote


def execute(kernel: Kernel, grid: tuple, tensors: dict, constants: dict, preallocated, gen, device: str = "cpu"):
    """Run `kernel` over `tensors` (name -> contiguous host or meta torch tensor); returns (result, spec, run).

    `result` mirrors what the kernel returned, with torch tensors: the parameter tensors themselves, new outputs
    as the preallocated tensors (or fresh ones)."""
    check_grid(kernel, grid, gen)
    hbm = {}
    for name, t in tensors.items():
        d = dt.lookup(t.dtype, f"parameter '{name}'")
        if not t.is_contiguous():
            t = tensors[name] = t.contiguous()
        alloc = Allocation(shared_hbm, t.reshape(-1), d, tuple(t.shape), None, name)
        alloc.mutable = (not kernel.legacy) or name in kernel.mutable_params
        hbm[name] = alloc
    run = interpreter.Run(kernel, grid, kernel.legacy, device, gen)
    run.preallocated = [p.reshape(-1) for p in preallocated] if preallocated is not None else []
    # Tile-sized ops (tens of thousands of elements) are below where intra-op threads pay off; on a busy host
    # their synchronization costs more than the op. The kernel runs its instructions on one thread.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = interpreter.launch_run(run, hbm, constants)
    finally:
        torch.set_num_threads(threads)
    items, single = _returned(kernel, result)
    spec_items = []
    for t in items:
        a = t._alloc
        if a.param is not None:
            spec_items.append(("param", a.param))
        else:
            spec_items.append(("new", a.output_slot))
    if kernel.legacy:
        returned = {a for kind, a in spec_items if kind == "param"}
        for name in kernel.mutable_params:
            if name in hbm and hbm[name].written and name not in returned:
                fail("err_mutable_parameter_not_returned", f"Mutable kernel parameter '{name}' not returned by "
                     "`return` statement", f"return it: `return ..., {name}`", loc=_func_loc(kernel.func))
    for a in run.shared:
        if a.output_slot is not None and not a.written:
            fail("err_tensor_output_not_written_to", f"kernel output {a.describe()} is never written",
                 "store into it (nl.store / nisa.dma_copy), or check the loop bounds that should write it", loc=a.loc)
    new_outputs = tuple((a.shape, a.dtype.storage) for a in run.shared if a.output_slot is not None)
    spec = ResultSpec(tuple(spec_items), single, new_outputs,
                      tuple(n for n, a in hbm.items() if a.written))
    torch_items = []
    for kind, k in spec_items:
        if kind == "param":
            torch_items.append(tensors[k])
        else:
            a = run.shared[k]
            torch_items.append(a.flat.view(a.shape))
    if single:
        return (torch_items[0] if torch_items else None), spec, run
    return tuple(torch_items), spec, run


def _returned(kernel: Kernel, result) -> tuple[list, bool]:
    if result is None:
        return [], True
    single = isinstance(result, NkiTensor)
    items = [result] if single else list(result) if isinstance(result, (tuple, list)) else None
    if items is None or not all(isinstance(t, NkiTensor) for t in items):
        fail("err_kernel_return", f"kernel {kernel.__name__} returned {type(result).__name__}: a kernel returns its "
             "output tensors (one, or a tuple)", "return the nl.shared_hbm tensors it wrote",
             loc=_func_loc(kernel.func))
    for t in items:
        a = t._alloc
        if a.buffer is not shared_hbm:
            fail("err_output_must_be_shared_hbm",
                 f"kernel output {t.describe()} is in {a.buffer.value}: outputs must be nl.shared_hbm tensors "
                 "(NKI 0.3+)", "allocate it with nl.ndarray(shape, dtype=..., buffer=nl.shared_hbm) and return that",
                 loc=a.loc or _func_loc(kernel.func))
        if t.shape != a.shape or t.offset != 0 or not t.is_contiguous():
            fail("err_kernel_return", f"kernel {kernel.__name__} returns a view {t.describe()} of {a.describe()}: "
                 "return whole tensors", "return the tensor itself, not a slice of it", loc=_func_loc(kernel.func))
    return items, single


__all__ = ["execute", "ResultSpec"]
