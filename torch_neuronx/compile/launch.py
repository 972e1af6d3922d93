"""Run a compiled graph on a NeuronCore: one launch, zero-copy, like executing a NEFF.

A compiled graph is host code that expects CPU tensors (host_graph.py). It is
exposed to the dispatcher as the CPU kernel of one custom op,
`neuron_compiled::launch(Tensor(a)[] device_args, int graph) -> Tensor(a)[]`,
that has no neuron kernel. Calling it with neuron tensors therefore goes
through the device's boxed fallback (csrc/Fallback.cpp), which already does
what a graph launch needs: it gives the kernel zero-copy host views of the
device tensors (so in-place updates land in device memory), adopts the fresh
outputs as device tensors without a copy (counted against the core's HBM),
and re-wraps outputs that alias an input on that input's device storage.

Inputs that are not device tensors (host tensors, Python numbers) and outputs
that must stay on the host cannot go through the op's Tensor[] arguments
(the fallback would reject a host tensor next to device ones); they travel on
the side, in a per-thread frame of the graph.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Sequence

import torch
from torch._inductor.output_code import OutputCode

from .host_graph import HostGraphPlan

_graphs: "weakref.WeakValueDictionary[int, NeuronGraph]" = weakref.WeakValueDictionary()
_next_id = 0
_ids_lock = threading.Lock()

_lib = torch.library.Library("neuron_compiled", "DEF")
# Outputs may alias inputs (a graph can return an input, or a view of one), and the schema says so.
_lib.define("launch(Tensor(a)[] device_args, int graph) -> Tensor(a)[]")


def _launch_on_host(host_views: list[torch.Tensor], graph: int) -> list[torch.Tensor]:
    return _graphs[graph]._run_on_host(host_views)


_lib.impl("launch", _launch_on_host, "CPU")
# The launch runs below autograd: AOTAutograd already wrapped the compiled forward/backward pair.
_lib.impl("launch", torch.library.fallthrough_kernel, "Autograd")
_launch = torch.ops.neuron_compiled.launch.default


class _Frame:
    __slots__ = ("args", "outputs", "output_sources")

    def __init__(self, args: list[Any]):
        self.args = args
        self.outputs: Sequence[Any] = ()
        self.output_sources: list[int] = []  # per device output: index of the device input it is, or -1


class NeuronGraph(OutputCode):
    """A compiled graph, callable with the boxed calling convention of AOTAutograd (a list it may clear)."""

    def __init__(self, host_callable: Callable[[list[Any]], Sequence[Any]], plan: HostGraphPlan, name: str):
        global _next_id
        # An instance attribute: wrappers (torch._dynamo.disable) copy __dict__, and AOTAutograd
        # checks the wrapper for it to pass the argument list instead of unpacking it.
        self._boxed_call = True
        self._host_callable = host_callable
        self.plan = plan
        self.name = name
        self._frames = threading.local()
        # A launch needs at least one device tensor to reach the device's fallback.
        self._anchor = (torch.empty(0, device=torch.device("neuron", plan.device_index))
                        if not plan.device_inputs else None)
        with _ids_lock:
            self._id = _next_id
            _next_id += 1
        _graphs[self._id] = self

    def __call__(self, args: list[Any]) -> list[Any]:
        plan = self.plan
        device_args = [args[i] for i in plan.device_inputs] if plan.device_inputs else [self._anchor]
        frame = _Frame(list(args))
        args.clear()  # boxed convention: the callee owns the inputs and may free them early
        stack = self._frame_stack()
        stack.append(frame)
        try:
            device_outputs = _launch(device_args, self._id)
        finally:
            stack.pop()
        outputs = list(frame.outputs)
        returned = iter(device_outputs)
        for slot, source in zip(plan.device_outputs, frame.output_sources):
            outputs[slot] = next(returned) if source < 0 else device_args[source]
        return outputs

    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        pass

    def prepare_for_serialization(self) -> None:
        # Persistence is the NEFF cache's job (neff_cache.py), not AOTAutograd's cache.
        raise NotImplementedError("neuron graphs are persisted by the NEFF cache")

    def _frame_stack(self) -> list[_Frame]:
        stack = getattr(self._frames, "stack", None)
        if stack is None:
            stack = self._frames.stack = []
        return stack

    def _run_on_host(self, host_views: list[torch.Tensor]) -> list[torch.Tensor]:
        plan = self.plan
        frame = self._frame_stack()[-1]
        host_args = frame.args
        frame.args = None
        for slot, view in zip(plan.device_inputs, host_views):
            host_args[slot] = view
        if plan.uses_rng:
            outputs = _with_core_generator(plan.device_index, self._host_callable, host_args)
        else:
            outputs = self._host_callable(host_args)
        frame.outputs = outputs
        # A graph often returns some of its inputs unchanged (weights saved for the backward pass).
        # Hand those back as the caller's own device tensors instead of sending them through the
        # launch's outputs, where each would be re-wrapped: checked by identity, so never wrong.
        sources = []
        returned = []
        for slot, candidate in zip(plan.device_outputs, plan.output_input_candidates):
            out = outputs[slot]
            if candidate >= 0 and out is host_views[candidate]:
                sources.append(candidate)
            else:
                sources.append(-1)
                returned.append(out)
        frame.output_sources = sources
        return returned


def _with_core_generator(device_index: int, fn: Callable[[list[Any]], Any], args: list[Any]) -> Any:
    """Run fn with the host RNG replaced by the core's generator.

    Inductor's host code draws random numbers (dropout masks, seeds) from the
    CPU default generator; on the device they must come from the core's own
    generator, so that torch.neuron.manual_seed governs compiled code as it
    governs eager code. Swap the states in, run, swap them back.
    """
    from torch_neuronx import _C
    core = _C._default_generator(device_index)
    host = torch.default_generator
    saved = host.get_state()
    host.set_state(core.get_state())
    try:
        return fn(args)
    finally:
        core.set_state(host.get_state())
        host.set_state(saved)
