"""Ops TorchNeuron lowers by its own means, not by torch-mlir's op lowerings: NKI kernels and collectives.

On Trainium an NKI kernel in a compiled graph becomes a `stablehlo.custom_call @AwsNeuronCustomNativeKernel`
whose `backend_config` carries the kernel (neuronx-cc compiles it into the NEFF with the rest of the graph;
the target and the base64 JSON config are those of AWS's NKI custom-op guide, nki/guides/framework_custom_op.rst),
with `output_operand_aliases` for the inputs the kernel writes; a collective becomes a StableHLO collective
(TorchNeuron's CollectiveLegalization and AWS's torch-mlir fork). The public torch-mlir imports neither. So the
lowering cuts each such op out of the graph it gives torch-mlir, its results made inputs of the program and its
tensor operands outputs (`cut`), and once the rest is StableHLO puts it back between them as a
`stablehlo.custom_call` (`stitch`):
  - NKI kernels: `nki::call_kernel` (a wrap_nki launch, a kernel called with tensors; an op made with
    torch_neuronx.nki_op is traced through to its launches, as TorchNeuron's nki_op is), inside
    auto_functionalized / auto_functionalized_v2 (the op writes its outputs): target AwsNeuronCustomNativeKernel,
    backend_config base64 JSON naming the kernel (`func_name`: the kernel's function),
    output_operand_aliases for each input written;
  - collectives (functional c10d ops): a custom call named after the op, its non-tensor arguments in
    backend_config (`reduce_op=sum, group_name=0`; a stand-in: TorchNeuron's StableHLO collectives are not
    modelled); `wait_tensor` as the value it waits for.
Any other op without a lowering (a torch.library custom op) stays in the graph and fails, as on Trainium.
StableHLO's reference interpreter cannot run a custom call: the interpreter check skips such programs
(lowering_check.py).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import operator
import sys
from typing import Any, Callable

import torch
import torch.fx

aten = torch.ops.aten
NKI_TARGET = "AwsNeuronCustomNativeKernel"
META_KEY = "neuron_stand_ins"  # GraphModule.meta: the StandIns of a cut graph
_COLLECTIVE_NAMESPACES = ("_c10d_functional", "_c10d_functional_autograd", "c10d", "_dtensor")
_WAITS = ("_c10d_functional.wait_tensor", "_c10d_functional_autograd.wait_tensor")


@dataclasses.dataclass(frozen=True)
class StandIn:
    """A custom call to put back into the lowered program."""
    target: str
    backend_config: str
    operands: tuple[int, ...]                # the program's outputs that carry its operands
    results: tuple[int, ...]                 # the program's inputs that carry its results
    aliases: tuple[tuple[int, int], ...]     # (result, operand): an operand the op writes


# ---------------------------------------------------------------- the cut, in the FX graph

@dataclasses.dataclass
class _Call:
    """What a node computes, as one custom call: operands (FX nodes), results (their values), and how the
    node's own values are made from the results (`value_at`: the value at an index path of the node's output)."""
    target: str
    config: str
    operands: list[torch.fx.Node]
    results: list[Any]
    aliases: list[tuple[int, int]]
    value_at: Callable[[tuple, list[torch.fx.Node]], torch.fx.Node | None]


def cut(gm: torch.fx.GraphModule) -> bool:
    """Cut every NKI kernel and collective out of `gm` (in place); record their StandIns in gm.meta[META_KEY]
    (positions of the program's inputs and outputs as they are now: later passes add inputs and outputs only
    after these). Returns whether there were any."""
    glue = sys.modules.get("torch_neuronx.nki.torch_glue")  # no NKI op exists before it is imported
    output = gm.graph.output_node()
    count = len(output.args[0]) if isinstance(output.args[0], (list, tuple)) else 1
    operands: list[torch.fx.Node] = []  # to add to the outputs (whose own values may be replaced below)
    pending: list[tuple[_Call, list[int], list[torch.fx.Node]]] = []
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        if _op_name(node.target) in _WAITS:
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
            continue
        with gm.graph.inserting_before(node):
            call = _nki_call(gm, node, glue) or _collective(node)
        if call is None:
            continue
        operand_at = list(range(count + len(operands), count + len(operands) + len(call.operands)))
        operands += call.operands
        inputs = [_new_input(gm, f"{node.name}_result_{i}", v, node) for i, v in enumerate(call.results)]
        with gm.graph.inserting_before(node):
            _replace_values(gm, node, (), lambda path: call.value_at(path, inputs))
        gm.graph.erase_node(node)
        pending.append((call, operand_at, inputs))
    for node in list(gm.graph.nodes):  # process groups and other script objects (the collectives took them)
        if node.op == "placeholder" and not node.users and \
                not isinstance(node.meta.get("val"), (torch.Tensor, torch.SymInt, int, float, bool)):
            gm.graph.erase_node(node)
    if not pending:
        return False
    values = output.args[0] if isinstance(output.args[0], (list, tuple)) else (output.args[0],)
    output.args = (tuple(values) + tuple(operands),)
    position = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    gm.meta[META_KEY] = [StandIn(c.target, c.config, tuple(at), tuple(position[i] for i in inputs),
                                 tuple(c.aliases)) for c, at, inputs in pending]
    return True


def _op_name(target: Any) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}"
    return ""


def _new_input(gm: torch.fx.GraphModule, name: str, value: Any, made_by: torch.fx.Node) -> torch.fx.Node:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    with gm.graph.inserting_after(placeholders[-1]) if placeholders else \
            gm.graph.inserting_before(next(iter(gm.graph.nodes))):
        node = gm.graph.placeholder(name)
    node.meta["val"] = value
    if "stack_trace" in made_by.meta:
        node.meta["stack_trace"] = made_by.meta["stack_trace"]
    return node


def _replace_values(gm: torch.fx.GraphModule, node: torch.fx.Node, path: tuple,
                    value_at: Callable[[tuple], torch.fx.Node | None]) -> None:
    """Uses of `node` (or, for a tuple, of its getitem users, recursively) replaced by value_at(index path)."""
    if not isinstance(node.meta.get("val"), (list, tuple)):
        if node.users:
            node.replace_all_uses_with(value_at(path))
        return
    for user in list(node.users):
        if user.op != "call_function" or user.target is not operator.getitem:
            raise NotImplementedError(f"{node.name}'s output is used whole by {user.name}")
        _replace_values(gm, user, path + (user.args[1],), value_at)
        gm.graph.erase_node(user)


def _tensor_leaves(value: Any, path: tuple = ()) -> list[tuple[tuple, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, (list, tuple)):
        return [leaf for i, v in enumerate(value) for leaf in _tensor_leaves(v, path + (i,))]
    return []


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return repr(value)


def _add_argument(name: str, value: Any, operands: list, names: list, constants: dict) -> None:
    """A tensor argument (or list of them) as operands, any other as a constant of the config."""
    values = value if isinstance(value, (list, tuple)) else [value]
    if values and all(isinstance(v, torch.fx.Node) and isinstance(v.meta.get("val"), torch.Tensor) for v in values):
        operands += values
        names += [name] if values is not value else [f"{name}[{j}]" for j in range(len(values))]
    else:
        constants[name] = _jsonable(torch.fx.node.map_arg(value, lambda n: n.meta.get("val")))


def _output_names(leaves: list) -> list[str]:
    return [f"output{'_'.join(str(p) for p in path)}" for path, _ in leaves]


def _plain_call(node: torch.fx.Node, target: str, config: Callable[[dict, list[str], list[str]], str]) -> _Call:
    """A functional op: its tensor arguments are the operands, its tensor outputs the results."""
    operands, names, constants = [], [], {}
    for i, arg in enumerate(node.target._schema.arguments):
        value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name, arg.default_value)
        _add_argument(arg.name, value, operands, names, constants)
    leaves = _tensor_leaves(node.meta["val"])
    index = {path: k for k, (path, _) in enumerate(leaves)}
    return _Call(target, config(constants, names, _output_names(leaves)), operands, [v for _, v in leaves], [],
                 lambda path, inputs: inputs[index[path]] if path in index else None)


def _collective(node: torch.fx.Node) -> _Call | None:
    if not isinstance(node.target, torch._ops.OpOverload) or node.target.namespace not in _COLLECTIVE_NAMESPACES \
            or not _tensor_leaves(node.meta.get("val")):
        return None
    return _plain_call(node, _op_name(node.target), lambda constants, names, outputs: ", ".join(
        f"{k}={v}" for k, v in constants.items()))


def _nki_config(func_name: str, grid: Any, inputs: list[str], outputs: list[str], constants: dict) -> str:
    """The custom call's backend_config, as neuronx-cc reads it for NKI kernels: base64 of a JSON object (here
    naming the kernel the emulator runs, as no kernel binary is compiled)."""
    config = {"func_name": func_name, "grid": list(grid), "input_names": inputs, "output_names": outputs,
              "constants": constants, "has_collectives": False}
    return base64.b64encode(json.dumps(config).encode()).decode()


def _nki_call(gm: torch.fx.GraphModule, node: torch.fx.Node, glue: Any) -> _Call | None:
    """An NKI kernel launch (nki::call_kernel, which writes its outputs: always inside auto_functionalized(_v2)
    in a compiled graph; an nki_op is traced through to its launches) as one custom call (None for any other
    node)."""
    from torch._higher_order_ops.auto_functionalize import auto_functionalized, auto_functionalized_v2
    if glue is not None and node.target in (auto_functionalized, auto_functionalized_v2) and \
            node.args[0] is torch.ops.nki.call_kernel.default:
        return _functionalized_nki_call(gm, node, glue)
    return None


def _functionalized_nki_call(gm: torch.fx.GraphModule, node: torch.fx.Node, glue: Any) -> _Call:
    """auto_functionalized_v2(op, **kwargs) (and v1): `op` on views of `_all_bases`, returning (*op outputs,
    *new bases). The custom call takes the op's inputs (the views it writes as they are before) and returns
    its outputs and the new values of the views it writes (aliased to those operands); each new base is its
    old value with the written views scattered into it."""
    from torch._higher_order_ops.auto_functionalize import (AliasViewInfo, NotView, SliceViewInfo,
                                                           auto_functionalized_v2, get_mutable_args_from_schema,
                                                           read_view_information_from_args)
    op, kwargs = node.args[0], dict(node.kwargs)
    schema = op._schema
    names, types = get_mutable_args_from_schema(schema)
    if node.target is auto_functionalized_v2:
        bases = kwargs.pop("_all_bases")
        views = read_view_information_from_args(names, types, kwargs, bases)
    else:  # v1: the arguments written are whole tensors, returned in order after the outputs
        bases = [v for name in names for v in (kwargs[name] if isinstance(kwargs[name], list) else [kwargs[name]])]
        views, k = {}, 0
        for name in names:
            count = len(kwargs[name]) if isinstance(kwargs[name], list) else None
            views[name] = NotView(k) if count is None else [NotView(k + j) for j in range(count)]
            k += 1 if count is None else count

    def view_of(info: Any) -> torch.fx.Node:
        base = bases[info.base_index]
        if isinstance(info, (NotView, AliasViewInfo)):
            return base
        if isinstance(info, SliceViewInfo):
            return _call(gm, aten.slice.Tensor, (base, info.dim, info.start, info.end), node)
        if _is_reshape(base.meta["val"], info):
            return _call(gm, aten.reshape.default, (base, list(info.size)), node)
        from .errors import NeuronLoweringError
        from .lowering import user_line
        where = user_line(node)
        raise NeuronLoweringError(
            f"Neuron backend NEFF execution setup failed: {op} writes a strided view of a tensor (size "
            f"{list(info.size)}, stride {list(info.stride)}, offset {info.storage_offset}), which the emulator's "
            f"lowering presents to torch-mlir only for whole tensors, slices and reshapes.\n"
            f"  made by: {where or '(no source line recorded for this op)'}\n"
            f"  fixes: pass the kernel a contiguous tensor (x.contiguous()) and copy the result back, or a slice of "
            f"one; or set TORCHNEURON_LOWERING=0 to compile without lowering.", op=str(op), location=where)

    def scatter(base: torch.fx.Node, new: torch.fx.Node, info: Any) -> torch.fx.Node:
        if isinstance(info, (NotView, AliasViewInfo)):
            return new
        if isinstance(info, SliceViewInfo):
            return _call(gm, aten.slice_scatter.default, (base, new, info.dim, info.start, info.end), node)
        return _call(gm, aten.reshape.default, (new, list(base.meta["val"].shape)), node)

    # the arguments, in the op's order: (name, value), the value of a tensor the op writes its view info
    arguments = []
    for arg in schema.arguments:
        if arg.name in views:
            infos = views[arg.name]
            for j, info in enumerate(infos if isinstance(infos, list) else [infos]):
                if info is not None:
                    arguments.append((arg.name if not isinstance(infos, list) else f"{arg.name}[{j}]", info))
        else:
            arguments.append((arg.name, kwargs.get(arg.name, arg.default_value)))

    n_returns = max(len(schema.returns), 1)  # an op returning nothing has a None first
    returned = _tensor_leaves(tuple(node.meta["val"][:n_returns]))
    # nki::call_kernel(plan, inputs, outputs): the kernel's parameters in its signature's order, then the new
    # outputs it allocates, which are results only (the kernel does not read them)
    launch = glue.launch_signature(arguments[0][1])
    outputs = [info for _, info in arguments[2:]]  # the parameters written, then the new outputs
    inputs, writes = iter(arguments[1][1]), iter(outputs[:len(launch["written"])])
    operands, results = [], []
    for i, name in enumerate(launch["params"]):
        if i in launch["written"]:
            info = next(writes)
            results.append((name, info, len(operands)))
            operands.append(view_of(info))
        else:
            operands.append(next(inputs))
    results += [(f"out{k}", info, None) for k, info in enumerate(outputs[len(launch["written"]):])]
    config = _nki_config(launch["func_name"], launch["grid"], launch["params"],
                         [name for name, _, _ in results], launch["constants"])

    values = [v for _, v in returned] + [_value_of_view(bases, info) for _, info, _ in results]
    aliases = [(len(returned) + k, operand) for k, (_, _, operand) in enumerate(results) if operand is not None]
    returned_at = {path: k for k, (path, _) in enumerate(returned)}
    written = [(info, len(returned) + k) for k, (_, info, _) in enumerate(results)]

    def value_at(path: tuple, inputs: list[torch.fx.Node]) -> torch.fx.Node | None:
        if path[0] < n_returns:
            return inputs[returned_at[path]] if path in returned_at else None
        if node.target is auto_functionalized_v2:
            index = path[0] - n_returns
            base = bases[index]
            for info, k in written:  # the base with what the op wrote into it
                if info.base_index == index:
                    base = scatter(base, inputs[k], info)
            return base
        flat = sum((len(kwargs[n]) if isinstance(kwargs[n], list) else 1) for n in names[:path[0] - n_returns])
        return inputs[written[flat + (path[1] if len(path) > 1 else 0)][1]]
    return _Call(NKI_TARGET, config, operands, values, aliases, value_at)


def _is_reshape(base: torch.Tensor, info: Any) -> bool:
    """An as_strided view that is a reshape of the whole contiguous base."""
    size = list(info.size)
    contiguous = torch.empty(size, device="meta").stride()
    return base.is_contiguous() and info.storage_offset == base.storage_offset() and \
        list(info.stride) == list(contiguous) and torch.Size(size).numel() == base.numel()


def _value_of_view(bases: list, info: Any) -> torch.Tensor:
    """The (fake) value of the view of the bases `info` describes."""
    base = bases[info.base_index].meta["val"]
    with _fake_mode_of(base):
        return info.regenerate_view([b.meta["val"] if i == info.base_index else None for i, b in enumerate(bases)])


def _fake_mode_of(value: torch.Tensor) -> Any:
    import contextlib
    from torch._guards import detect_fake_mode
    return detect_fake_mode([value]) or contextlib.nullcontext()


def _call(gm: torch.fx.GraphModule, target: Any, args: tuple, made_by: torch.fx.Node) -> torch.fx.Node:
    """A new node (at the graph's insertion point) with its value and the stack trace of `made_by`."""
    new = gm.graph.call_function(target, args)
    values = torch.fx.node.map_arg(args, lambda n: n.meta["val"])
    first = next(v for v in values if isinstance(v, torch.Tensor))
    with _fake_mode_of(first):
        new.meta["val"] = target(*values)
    if "stack_trace" in made_by.meta:
        new.meta["stack_trace"] = made_by.meta["stack_trace"]
    return new


# ---------------------------------------------------------------- the stitch, in the StableHLO

def stitch(module: Any, stand_ins: list[StandIn]) -> None:
    """Put each StandIn back into the lowered `module` (in place) as a stablehlo.custom_call from the program
    outputs that carry its operands to the inputs that carry its results; those outputs and inputs go."""
    from torch_mlir import ir
    func = next(op for op in module.body.operations if op.operation.name == "func.func")
    block = func.regions[0].blocks[0]
    ret = block.operations[len(block.operations) - 1]
    with module.context, ir.Location.unknown():
        for s in stand_ins:
            results = [block.arguments[i].type for i in s.results]
            single = len(results) == 1
            aliases = [ir.Attribute.parse(
                f"#stablehlo.output_operand_alias<output_tuple_indices = {[] if single else [r]}, "
                f"operand_index = {o}, operand_tuple_indices = []>") for r, o in s.aliases]
            call = ir.Operation.create(
                "stablehlo.custom_call", results=results, operands=[ret.operands[i] for i in s.operands],
                attributes={"call_target_name": ir.StringAttr.get(s.target),
                            "backend_config": ir.StringAttr.get(s.backend_config),
                            "api_version": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 2),
                            "output_operand_aliases": ir.ArrayAttr.get(aliases)},
                ip=ir.InsertionPoint(ret))
            for k, i in enumerate(s.results):
                block.arguments[i].replace_all_uses_with(call.results[k])
            _move_users_after(block, call, ret)
        cut_operands = {i for s in stand_ins for i in s.operands}
        kept = [v for i, v in enumerate(ret.operands) if i not in cut_operands]
        ir.Operation.create("func.return", operands=kept, ip=ir.InsertionPoint(ret))
        ret.erase()
        for i in sorted({i for s in stand_ins for i in s.results}, reverse=True):
            block.erase_argument(i)
        func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [a.type for a in block.arguments], [v.type for v in kept]))
        for name in ("arg_attrs", "res_attrs"):
            if name in func.attributes:
                del func.attributes[name]


def _move_users_after(block: Any, call: Any, ret: Any) -> None:
    """The ops that use `call`'s results, directly or not, moved after it (in their order): it was made at the
    end of the block, after the ops that compute its operands, which do not depend on its results."""
    produced = {call.results[k] for k in range(len(call.results))}
    for op in list(block.operations):
        if op == call:
            break
        if _uses_any(op, produced):
            produced.update(op.results[k] for k in range(len(op.results)))
            op.move_before(ret)


def _uses_any(op: Any, values: set) -> bool:
    if any(v in values for v in op.operands):
        return True
    return any(_uses_any(inner, values) for region in op.regions for b in region.blocks for inner in b.operations)
