"""NKI kernels from PyTorch, as TorchNeuron runs them: `wrap_nki(kernel)[grid](...)`, `nki_op(...)`, and
`@nki.jit` kernels called with tensors.

A launch with tensors becomes one operation, the custom op `torch.ops.nki.call_kernel(plan, inputs, outputs)`:
  1. the plan: the kernel run once as a dry run on meta tensors for these shapes, dtypes and constants (cached).
     It gives the new outputs' shapes and dtypes, which parameters the kernel writes, the static checks' errors
     at the kernel line, and the cost estimate. Under torch.compile, Dynamo folds the plan to a constant
     (torch._dynamo.assume_constant_result, marked without importing Dynamo: integrations/
     dynamo_constant_result.py), so the kernel is one node of the graph, never a graph break;
  2. the caller allocates the new outputs on the inputs' device and calls the op with the parameters the
     kernel writes and the new outputs as its mutated arguments (torch.library's `Tensor(a!)[]`): eager
     autograd sees in-place writes, torch.compile functionalizes them like any mutating custom op;
  3. the op's kernel runs the kernel on host aliases of the device tensors (the host bridge:
     torch_neuronx._C._host_alias; TORCHNEURON_STRICT_MEMORY=1 holds), records the cost per engine in
     torch_neuronx.nki.statistics() and, under torch.profiler, a `nki <kernel> [estimate ...]` range inside the
     `nki::call_kernel` neuron kernel.

`nki_op(name, mutates_args=...)` is torch.library.custom_op with the function itself as its fake kernel (it
must run on fake tensors: kernel launches do); register autograd on the result as on any custom op. Under
torch.compile it is traced through (as TorchNeuron's nki_op: a FunctionalTensorMode rule), so a compiled graph
holds its kernel launches. The real TorchNeuron routes launches through a HigherOrderOperator
(nki_kernel_wrapper); here the custom op nki::call_kernel plays that part (docs/nki.md: what differs).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from ..integrations.dynamo_constant_result import assume_constant_result
from . import cost as cost_model
from . import launcher
from . import target
from .errors import NkiError
from . import kernel as kernel_module
from .kernel import Kernel, Launch


@dataclass(frozen=True)
class Plan:
    kernel: Kernel
    grid: tuple
    names: tuple            # tensor parameters, in signature order
    constants: dict
    gen: object
    spec: launcher.ResultSpec
    mutated: tuple          # positions (in `names`) of the parameters the kernel writes
    cost: cost_model.CallCost


_lock = threading.Lock()
_plans: list[Plan] = []
_plan_ids: dict = {}


def _hashable(v):
    if isinstance(v, list):
        return ("list", tuple(_hashable(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted((k, _hashable(x)) for k, x in v.items())))
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    return v


@assume_constant_result
def _plan_id(kernel: Kernel, grid: tuple, names: tuple, shapes: tuple, dtypes: tuple, const_names: tuple,
             *const_values) -> int:
    """The plan of a launch (a dry run on meta tensors, cached): its index in the plan table."""
    gen = target.current()
    key = (id(kernel), grid, names, shapes, dtypes, const_names, tuple(_hashable(v) for v in const_values),
           gen.version)
    with _lock:
        pid = _plan_ids.get(key)
    if pid is not None:
        return pid
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    constants = dict(zip(const_names, const_values))
    # on plain meta tensors, also when an nki_op's fake kernel first launches it under torch.compile's fake mode
    with unset_fake_temporarily():
        metas = {n: torch.empty(s, dtype=d, device="meta") for n, s, d in zip(names, shapes, dtypes)}
        _, spec, run = launcher.execute(kernel, grid, metas, constants, None, gen, device="meta")
    mutated = tuple(i for i, n in enumerate(names) if n in spec.written_params)
    plan = Plan(kernel, grid, names, constants, gen, spec, mutated, run.cost)
    with _lock:
        pid = _plan_ids.get(key)
        if pid is None:
            _plans.append(plan)
            pid = _plan_ids[key] = len(_plans) - 1
    return pid


@assume_constant_result
def _plan_layout(pid: int) -> tuple:
    """(new outputs as (shape, dtype), positions of written parameters, returned items, single)."""
    p = _plans[pid]
    return p.spec.new_outputs, p.mutated, p.spec.items, p.spec.single


_op_local = threading.local()


def _inside_nki_op() -> bool:
    return bool(getattr(_op_local, "ops", ()))


def call(kernel: Kernel, grid: tuple, bound: dict):
    """A launch with torch tensors: one nki::call_kernel op (see the module docstring)."""
    names = tuple(n for n, v in bound.items() if isinstance(v, torch.Tensor))
    const_names = tuple(n for n in bound if n not in names)
    tensors = [bound[n] for n in names]
    if any(t.requires_grad for t in tensors) and torch.is_grad_enabled() and not _inside_nki_op():
        raise RuntimeError(
            f"kernel {kernel.__name__} was launched with tensors that require grad, but a kernel launch has no "
            "derivative: wrap the launch in torch_neuronx.nki_op(...) and register its backward with "
            ".register_autograd(...), or launch it under torch.no_grad()")
    device = tensors[0].device
    for n, t in zip(names, tensors):
        if t.device != device:
            raise RuntimeError(f"kernel {kernel.__name__}: Expected all tensors to be on the same device, but "
                               f"'{n}' is on {t.device} and '{names[0]}' on {device}")
    pid = _plan_id(kernel, grid, names, tuple(tuple(t.shape) for t in tensors), tuple(t.dtype for t in tensors),
                   const_names, *[bound[n] for n in const_names])
    new_outputs, mutated, items, single = _plan_layout(pid)
    for i in mutated:
        if not tensors[i].is_contiguous():
            raise NkiError("err_mutable_parameter_layout",
                           f"kernel {kernel.__name__} writes parameter '{names[i]}', which is not contiguous",
                           f"pass a contiguous tensor ({names[i]}.contiguous()) and use that one afterwards",
                           loc=(kernel.func.__code__.co_filename, kernel.func.__code__.co_firstlineno))
    outs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in new_outputs]
    ins = [tensors[i].contiguous() for i in range(len(tensors)) if i not in mutated]
    torch.ops.nki.call_kernel(pid, ins, [tensors[i] for i in mutated] + outs)
    results = [outs[k] if kind == "new" else tensors[names.index(k)] for kind, k in items]
    if single:
        return results[0] if results else None
    return tuple(results)


kernel_module.torch_launch = call  # kernel.py launches with torch tensors through here


# -- the op ------------------------------------------------------------------------------------------------

def _host(t: torch.Tensor) -> torch.Tensor:
    if t.device.type == "cpu":
        return t
    from .. import _C
    return _C._host_alias(t)


@torch.library.custom_op("nki::call_kernel", mutates_args=("outputs",))
def call_kernel(plan: int, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
    """Run NKI kernel launch `plan` (torch_neuronx.nki.torch_glue) on its tensor parameters."""
    p = _plans[plan]
    n_written = len(p.mutated)
    written, new = outputs[:n_written], outputs[n_written:]
    it_in, it_w = iter(inputs), iter(written)
    by_name = {n: (next(it_w) if i in p.mutated else next(it_in)) for i, n in enumerate(p.names)}
    host = {n: _host(t) for n, t in by_name.items()}
    pre = [_host(t) for t in new]
    label = f"nki {p.kernel.__name__} [{p.cost.summary()} on {p.gen.name}]"
    with torch.profiler.record_function(label):
        _, spec, run = launcher.execute(p.kernel, p.grid, host, p.constants, pre, p.gen)
    if set(spec.written_params) - set(p.spec.written_params):
        raise RuntimeError(f"kernel {p.kernel.__name__} wrote parameters {spec.written_params} on this call but "
                           f"{p.spec.written_params} on its dry run: kernels must not depend on tensor values in "
                           "Python control flow")
    cost_model.record(p.kernel.__name__, run.cost, p.gen.name)


@call_kernel.register_fake
def _call_kernel_fake(plan, inputs, outputs) -> None:
    return None


def launch_signature(plan: int) -> dict:
    """A launch as the compile lowering presents it (compile/stand_ins.py: a StableHLO custom call): the kernel's
    name, grid, tensor parameters in signature order, the positions of those it writes, its constants."""
    p = _plans[plan]
    return {"func_name": p.kernel.__name__, "grid": list(p.grid), "params": list(p.names), "written": list(p.mutated),
            "constants": {k: v if isinstance(v, (str, int, float, bool)) or v is None else repr(v)
                          for k, v in p.constants.items()}}


def wrap_nki(kernel, **kwargs):
    """A launchable kernel for PyTorch code, as torch_neuronx.wrap_nki: `wrap_nki(k)(*args)`,
    `wrap_nki(k)[grid](*args)`; accepts @nki.jit / @neuronxcc.nki.jit kernels and plain functions."""
    if isinstance(kernel, Launch):
        return kernel
    if not isinstance(kernel, Kernel):
        kernel = Kernel(kernel)
    return Launch(kernel, ())


def nki_op(name: str, fn=None, mutates_args=(), *, device_types=None, schema=None):
    """A torch.library custom op implemented by NKI kernels, as torch_neuronx.nki_op.

    `fn` launches the kernels (wrap_nki(k)[grid](...) or k(...)); it is also the op's fake kernel, so it must
    run on fake tensors (kernel launches do). Use `.register_autograd(backward, setup_context=...)` on the
    result for training. Under torch.compile(backend="neuron", fullgraph=True) the op is traced through: its
    kernel launches are the graph's nodes.
    A custom op may not return its inputs: where `fn` returns a parameter the kernel wrote in place (as
    TorchNeuron's examples do), the op returns a copy of it; the parameter itself is updated in place."""
    def dec(f):
        import functools
        import torch.utils._pytree as pytree

        @functools.wraps(f)
        def run(*args, **kwargs):
            _op_local.ops = getattr(_op_local, "ops", ()) + (name,)
            try:
                out = f(*args, **kwargs)
            finally:
                _op_local.ops = _op_local.ops[:-1]
            inputs = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
            return pytree.tree_map(lambda o: o.clone() if isinstance(o, torch.Tensor) and
                                   any(o is a for a in inputs) else o, out)

        op = torch.library.custom_op(name, run, mutates_args=mutates_args, device_types=device_types,
                                     schema=schema if schema is not None else
                                     torch.library.infer_schema(f, mutates_args=mutates_args))
        op.register_fake(run)
        # Under torch.compile the op is traced through, as TorchNeuron's nki_op does (its FunctionalTensorMode
        # rule): the graph holds the kernel launches (nki::call_kernel, functionalized), not the op. So an op
        # writing its inputs never goes through auto_functionalized (whose fake kernel cannot take an argument
        # named `mode`, torch 2.13).
        from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
        from torch._subclasses.fake_tensor import FakeTensor

        def traced_through(mode, op_, types, args, kwargs):
            if any(not issubclass(t, (FakeTensor, FunctionalTensor)) and t is not torch.Tensor for t in types):
                return NotImplemented
            with mode:
                return run(*args, **kwargs)
        op.register_torch_dispatch(FunctionalTensorMode, traced_through)
        return op
    return dec if fn is None else dec(fn)
