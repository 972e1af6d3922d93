"""Running a kernel on the emulated NeuronCore: the launch, its SPMD programs, and what each instruction does
to the core's state.

A kernel function is plain Python that calls NKI APIs; each API call executes at once on whole tiles (an
instruction = a few torch vector ops over the tile, not a loop over elements). This module keeps the state of
the running kernel (thread-local `Run`): the target generation, the program (SPMD instance) executing, the
instruction counter that orders every use of every tile, affine_range loops, and the cost per engine. At the
end of each program it checks that the tiles live at the same time fit the core's SBUF and PSUM (checks.py).

Runs are on host memory (the kernel's HBM tensors are host aliases of device memory: torch_glue.py) or on
meta tensors (a dry run: shapes, dtypes, which parameters the kernel writes, and every static check, without
computing values).
"""

from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass

import torch

from . import cost as cost_model
from . import target
from .errors import fail
from .memory import HBM, ON_CHIP, Allocation, NkiTensor, contiguous_strides, shared_hbm

_local = threading.local()


def current() -> "Run":
    run = getattr(_local, "run", None)
    if run is None:
        fail("err_nki_api_outside_of_nki_kernel", "calling an NKI API outside of an NKI kernel is not supported",
             "call it inside a function decorated with @nki.jit, launched with tensors")
    return run


def active() -> "Run | None":
    return getattr(_local, "run", None)


@dataclass
class LoopFrame:
    kind: str          # "affine" (beta-1 parallel iterations), "sequential", "static"
    ident: int
    iteration: int = -1


_loop_ids = itertools.count()


@dataclass
class Param:
    name: str
    alloc: Allocation


class Run:
    """One launch of a kernel: all its SPMD programs, on host memory or as a meta dry run."""

    def __init__(self, kernel, grid: tuple, legacy: bool, device: str, gen=None):
        self.kernel = kernel
        self.grid = grid
        self.legacy = legacy
        self.device = torch.device(device)
        self.meta = self.device.type == "meta"
        self.gen = gen or target.current()
        self.step = 0
        self.program_id: tuple = (0,) * max(len(grid), 1)
        self.on_chip: list[Allocation] = []
        self.loops: list[LoopFrame] = []
        self.cost = cost_model.CallCost()
        self.params: dict[str, Allocation] = {}
        self.shared: list[Allocation] = []       # shared_hbm tensors in allocation order (shared by programs)
        self._shared_cursor = 0
        self.reduce_regs = {}                    # ScalarE accumulation registers (activation reduce_cmd)
        self.preallocated: list = []             # flat tensors the caller made for the new outputs, by slot

    # -- memory -----------------------------------------------------------------------------------------
    def allocated(self, alloc: Allocation) -> None:
        alloc.loop_depth = self.affine_depth()
        if alloc.buffer in ON_CHIP:
            self.on_chip.append(alloc)

    def shared_tensor(self, shape, dtype, name, loc) -> NkiTensor:
        """A shared_hbm tensor: made by the first program, the same tensor for the next ones (as on hardware)."""
        from . import checks, dtypes as dt
        if self.legacy and self.loops:
            fail("err_shared_hbm_must_in_kernel_level",
                 "shared_hbm tensor can only be created in top level kernel scope (this one is inside a loop)",
                 "hoist the nl.ndarray(..., buffer=nl.shared_hbm) out of the loop", loc)
        shape, _ = checks.normalize_shape(shape, shared_hbm)
        dtype = dt.lookup(dtype)
        i = self._shared_cursor
        self._shared_cursor += 1
        if i < len(self.shared):
            alloc = self.shared[i]
            if alloc.shape != tuple(shape) or alloc.dtype != dtype:
                fail("err_spmd_divergence", f"program {self.program_id} creates shared_hbm tensor #{i} as "
                     f"{list(shape)} {dtype}, program 0 made it {list(alloc.shape)} {alloc.dtype}",
                     "every SPMD program must create the same shared_hbm tensors", loc)
            return NkiTensor(alloc, alloc.shape, contiguous_strides(alloc.shape), 0, None)
        numel = math.prod(shape)
        if i < len(self.preallocated):  # the caller allocated the outputs (device memory): NaN until written
            flat = self.preallocated[i]
            if flat.numel() != numel or flat.dtype != dtype.storage:
                raise RuntimeError(f"internal: output #{i} was preallocated as {flat.numel()} {flat.dtype}, the kernel "
                                   f"makes {list(shape)} {dtype}")
            flat.fill_(dt.nan_fill(dtype))
        else:
            flat = torch.full((numel,), dt.nan_fill(dtype), dtype=dtype.storage, device=self.device)
        alloc = Allocation(shared_hbm, flat, dtype, tuple(shape), None, name, loc, self.step)
        alloc.output_slot = i
        self.shared.append(alloc)
        return NkiTensor(alloc, alloc.shape, contiguous_strides(alloc.shape), 0, None)

    # -- instructions -----------------------------------------------------------------------------------
    def issue(self, engine: str, seconds: float, reads=(), writes=(), accumulate: bool = False) -> None:
        """One instruction on `engine`: orders it, marks its tiles used, checks and records its writes."""
        self.step += 1
        for t in reads:
            a = t._alloc
            a.last = self.step
            a.temporary = False
        self.issue_free(writes, accumulate)
        self.cost.charge(engine, seconds)

    def issue_free(self, writes=(), accumulate: bool = False) -> None:
        """Writes that cost no instruction of their own (a beta-1 result assigned where it belongs)."""
        for t in writes:
            a = t._alloc
            a.last = self.step
            if a.buffer in HBM:
                self._hbm_write(a)
            a.written = True
            if self.loops:
                self._affine_write(t, accumulate)

    def _hbm_write(self, a: Allocation) -> None:
        if a.param is not None and not a.mutable:
            fail("err_cannot_update_immutable_parameter",
                 f"Cannot update immutable parameter '{a.param}': kernel parameters are immutable by default",
                 f"annotate it `{a.param}: nt.mutable_tensor` (import neuronxcc.nki.typing as nt) and return it, or "
                 "write a new nl.shared_hbm tensor and return that")

    def _affine_write(self, t: NkiTensor, accumulate: bool) -> None:
        """Beta-1 rule: iterations of an affine_range loop run in parallel and must write distinct locations
        of every tensor made outside the loop (err_unexpected_output_dependencies); associative accumulations
        are the exception: matmul results into PSUM (`psum += ...`) and nl.loop_reduce."""
        a = t._alloc
        if accumulate:
            return
        for depth, frame in enumerate(self.loops):
            if frame.kind != "affine" or a.loop_depth > self.affine_depth_at(depth):
                continue
            idx = t.flat_indices()
            if idx is None:
                continue
            if a.writers is None:
                a.writers = {}
            w = a.writers.get(frame.ident)
            if w is None:
                w = a.writers[frame.ident] = torch.full((a.flat.numel(),), -1, dtype=torch.int32)
            seen = w[idx]
            other = (seen != -1) & (seen != frame.iteration)
            if bool(other.any()):
                prev = int(seen[other].reshape(-1)[0])
                fail("err_unexpected_output_dependencies",
                     f"unexpected output dependencies: iterations {prev} and {frame.iteration} of an affine_range "
                     f"loop write the same locations of {a.describe()} (affine_range iterations run in parallel)",
                     "index the destination with the loop variable so each iteration writes its own part, allocate "
                     "the tile inside the loop, or use nl.sequential_range for a loop-carried dependency")
            w[idx] = frame.iteration

    def affine_depth(self) -> int:
        return sum(1 for f in self.loops if f.kind == "affine")

    def affine_depth_at(self, depth: int) -> int:
        """Affine loops enclosing (not including) frame `depth`."""
        return sum(1 for f in self.loops[:depth] if f.kind == "affine")

    # -- programs -----------------------------------------------------------------------------------------
    def begin_program(self, program_id: tuple) -> None:
        self.program_id = program_id
        self.on_chip = []
        self.loops = []
        self._shared_cursor = 0
        self.reduce_regs = {}

    def end_program(self) -> None:
        from . import checks
        checks.capacity(self)


def loop(kind: str, args):
    """nl.affine_range / sequential_range / static_range: Python's range, with the loop's frame pushed."""
    r = range(*[int(a) for a in args])
    run = active()
    if run is None:
        yield from r
        return
    frame = LoopFrame(kind, next(_loop_ids))
    run.loops.append(frame)
    try:
        for i in r:
            frame.iteration = i
            yield i
    finally:
        if run.loops and run.loops[-1] is frame:
            run.loops.pop()
        elif frame in run.loops:
            run.loops.remove(frame)


def launch_run(run: Run, hbm_args: dict, constants: dict):
    """Run every program of `run.grid` over the HBM parameters; returns what program 0's kernel returned."""
    for name, alloc in hbm_args.items():
        alloc.param = name
        run.params[name] = alloc
    prev = getattr(_local, "run", None)
    _local.run = run
    try:
        result = None
        ids = list(itertools.product(*[range(int(g)) for g in run.grid])) if run.grid else [()]
        for n, pid in enumerate(ids):
            run.begin_program(pid)
            args = {name: NkiTensor(a, a.shape, contiguous_strides(a.shape), 0, None) for name, a in hbm_args.items()}
            out = run.kernel.func(**args, **constants)
            run.end_program()
            if n == 0:
                result = out
    finally:
        _local.run = prev
    return result


__all__ = ["Run", "current", "active", "launch_run", "loop"]
