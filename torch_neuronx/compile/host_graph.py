"""Retarget an ATen graph traced on neuron tensors to the host, for Inductor's C++ backend.

The emulated NeuronCore's memory is host RAM and its kernels are host code, so
"compiling for the NeuronCore" means generating fused host kernels. Inductor's
CPU backend does exactly that, but it only knows the "cpu" device: its
scheduler, fusion rules and wrapper make ~100 decisions on `device.type ==
"cpu"`. Teaching it a second host-like device would mean patching all of
them. Instead the graph that AOTAutograd hands to the compiler is rewritten
once, at compile time, to say "cpu" wherever it said "neuron" (device
arguments, constants, fake-tensor metadata). Inductor then compiles a plain
CPU graph, whose code launch.py runs on the device tensors themselves.

Where the device's own kernel differs from the host's (integer histc, which
neuron computes like CUDA and the host kernel lacks), the rewrite also puts the
device's semantics into the graph, so compiled and eager code agree.

What the rewrite records is a `HostGraphPlan`: the core the graph runs on,
and which outputs the traced graph put on the device and which on the host.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Sequence

import torch
import torch.fx

NEURON = "neuron"


@dataclasses.dataclass(frozen=True)
class HostGraphPlan:
    device_index: int                # the NeuronCore the graph runs on
    device_outputs: tuple[int, ...]  # graph outputs that are neuron tensors
    host_outputs: tuple[int, ...]    # graph outputs that are CPU tensors


@dataclasses.dataclass
class HostGraph:
    gm: torch.fx.GraphModule
    example_inputs: list[Any]
    plan: HostGraphPlan


def _is_neuron(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == NEURON


def _real_host_copy(x: torch.Tensor) -> torch.Tensor:
    """A real host copy of a real device tensor, made outside the compiler's fake-tensor mode."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():
        return x.detach().cpu()


def _host_device(x: Any) -> Any:
    """torch.device("neuron", i) -> torch.device("cpu"), recursively through args.

    A real neuron tensor baked into the arguments (a model's constant table) becomes a host copy.
    """
    if isinstance(x, torch.device) and x.type == NEURON:
        return torch.device("cpu")
    if _is_neuron(x) and not isinstance(x, torch._subclasses.FakeTensor):
        return _real_host_copy(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_host_device(v) for v in x)
    if isinstance(x, dict):
        return {k: _host_device(v) for k, v in x.items()}
    return x


def _fake_mode(example_inputs: Sequence[Any]):
    from torch._guards import detect_fake_mode
    mode = detect_fake_mode(example_inputs)
    if mode is None:
        from torch._subclasses.fake_tensor import FakeTensorMode
        mode = FakeTensorMode(allow_non_fake_inputs=True)
    return mode


def _host_example(x: Any, mode) -> Any:
    """A host fake tensor with the same sizes, strides and storage offset as the device one."""
    if not _is_neuron(x):
        return x
    with mode:
        if x.storage_offset() == 0:
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="cpu")
        base = torch.empty(x.untyped_storage().nbytes() // x.element_size(), dtype=x.dtype, device="cpu")
        return base.as_strided(x.shape, x.stride(), x.storage_offset())


def _graph_device_index(example_inputs: Sequence[Any], gm: torch.fx.GraphModule) -> int:
    for x in example_inputs:
        if _is_neuron(x):
            return x.device.index or 0
    for node in gm.graph.nodes:
        for a in list(node.args) + list(node.kwargs.values()):
            if isinstance(a, torch.device) and a.type == NEURON:
                return a.index or 0
    return torch.neuron.current_device()


aten = torch.ops.aten
prims = torch.ops.prims  # the graph is already decomposed: dtype casts are prims.convert_element_type


def _integer_histc_in_float(gm: torch.fx.GraphModule, node: torch.fx.Node) -> None:
    """histc of an integer tensor: count in float32 and return the input's dtype (neuron's kernel, as CUDA)."""
    x = node.args[0]
    dtype = x.meta["val"].dtype if isinstance(x, torch.fx.Node) and "val" in x.meta else None
    if dtype is None or dtype.is_floating_point:
        return
    with gm.graph.inserting_before(node):
        as_float = gm.graph.call_function(prims.convert_element_type.default, (x, torch.float32))
    node.args = (as_float,) + tuple(node.args[1:])
    with gm.graph.inserting_after(node):
        back = gm.graph.call_function(prims.convert_element_type.default, (node, dtype))
    node.replace_all_uses_with(back, delete_user_cb=lambda user: user is not back)


def _replace_tuple_outputs(gm: torch.fx.GraphModule, node: torch.fx.Node, host_call, others: dict) -> None:
    """Replace `node`, an op returning a tuple, by `host_call()` (a node inserted before it): the old op's leading
    outputs are the host call's, output i >= len(host call's) becomes others[i] (a constant, or a callable making
    a node), for the few graphs that read it."""
    with gm.graph.inserting_before(node):
        host = host_call()
        for user in list(node.users):
            assert user.op == "call_function" and user.target is operator.getitem, user
            index = user.args[1]
            if index not in others:
                user.args = (host, index)
                continue
            value = others[index]() if callable(others[index]) else others[index]
            for use in list(user.users):
                use.replace_input_with(user, value)
            gm.graph.erase_node(user)
    gm.graph.erase_node(node)


def _flash_attention_on_host(gm: torch.fx.GraphModule, node: torch.fx.Node) -> None:
    """CUDA's flash attention with its log-sum-exp (neuron's kernel: csrc/aten/native/FlashAttention.cpp) as the
    host's flash kernel, which returns (output, logsumexp) only: no cumulative lengths, no random state."""
    q, k, v, dropout_p, is_causal = (list(node.args) + [0.0, False])[:5]
    dropout_p, is_causal = node.kwargs.get("dropout_p", dropout_p), node.kwargs.get("is_causal", is_causal)
    empty = lambda: gm.graph.call_function(aten.empty.memory_format, ([0],), {"dtype": torch.long})  # noqa: E731
    q_len, k_len = (x.meta["val"].shape[2] for x in (q, k))
    _replace_tuple_outputs(gm, node, lambda: gm.graph.call_function(
        aten._scaled_dot_product_flash_attention_for_cpu.default, (q, k, v, dropout_p, is_causal),
        {"scale": node.kwargs.get("scale")}), {2: None, 3: None, 4: q_len, 5: k_len, 6: empty, 7: empty, 8: empty})


def _flash_attention_backward_on_host(gm: torch.fx.GraphModule, node: torch.fx.Node) -> None:
    grad_out, q, k, v, out, lse = node.args[:6]
    dropout_p, is_causal = node.args[10:12]
    _replace_tuple_outputs(gm, node, lambda: gm.graph.call_function(
        aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
        (grad_out, q, k, v, out, lse, dropout_p, is_causal), {"scale": node.kwargs.get("scale")}), {})


# Ops whose neuron kernel (csrc/aten/native/Histc.cpp, FlashAttention.cpp) has semantics the host kernel lacks.
_DEVICE_SEMANTICS = {
    aten.histc.default: _integer_histc_in_float,
    aten._scaled_dot_product_flash_attention.default: _flash_attention_on_host,
    aten._scaled_dot_product_flash_attention_backward.default: _flash_attention_backward_on_host,
}


def to_host(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> HostGraph:
    """Rewrite `gm` (in place) to run on the host; returns it with host example inputs and the plan."""
    mode = _fake_mode(example_inputs)
    device_index = _graph_device_index(example_inputs, gm)

    # Which outputs must be device tensors is decided by the graph as traced, before the rewrite.
    output_node = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    outputs = output_node.args[0]
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    values = [out.meta.get("val") if isinstance(out, torch.fx.Node) else None for out in outputs]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    # A graph traced on CPU tensors (a CPU model compiled for neuron) runs on device copies of its inputs
    # and returns device tensors, as TorchNeuron's executor does (launch.InputPlacement): none is a host output.
    traced_on_device = any(_is_neuron(ph.meta.get("val")) for ph in placeholders)
    device_outputs = tuple(i for i, v in enumerate(values)
                           if _is_neuron(v) or not traced_on_device and isinstance(v, torch.Tensor))
    host_outputs = tuple(i for i, v in enumerate(values)
                         if traced_on_device and isinstance(v, torch.Tensor) and v.device.type == "cpu")

    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in _DEVICE_SEMANTICS:
            _DEVICE_SEMANTICS[node.target](gm, node)
    for node in gm.graph.nodes:
        node.args = _host_device(node.args)
        node.kwargs = _host_device(node.kwargs)
        if node.op == "get_attr":
            # Real tensors baked into the graph (lifted constants): a host copy at compile time.
            owner, _, attr = node.target.rpartition(".")
            module = gm.get_submodule(owner) if owner else gm
            value = getattr(module, attr, None)
            if _is_neuron(value) and not isinstance(value, torch._subclasses.FakeTensor):
                setattr(module, attr, _real_host_copy(value))
    gm.recompile()

    host_inputs = [_host_example(x, mode) for x in example_inputs]
    # Inductor reads the fake tensors in node.meta (devices, strides and, for reinplacing, which
    # values alias which). Recompute them all on the rewritten graph rather than patching devices,
    # starting from the placeholders' own metadata: the example inputs may carry other strides
    # (AOTAutograd gives a backward graph its saved tensors with the strides the compiled forward
    # produced), which the graph's views were not traced for; Inductor copes with that, as on CPU.
    traced = [_host_example(ph.meta["val"] if _is_neuron(ph.meta.get("val")) else x, mode)
              for ph, x in zip(placeholders, example_inputs)]
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    # Real tensors in the arguments (constants the trace kept as values) are fakified on the way,
    # as Inductor does for the same graph on CPU.
    allow, mode.allow_non_fake_inputs = mode.allow_non_fake_inputs, True
    try:
        with mode:
            FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*traced)
    finally:
        mode.allow_non_fake_inputs = allow

    plan = HostGraphPlan(device_index=device_index, device_outputs=device_outputs, host_outputs=host_outputs)
    return HostGraph(gm, host_inputs, plan)
