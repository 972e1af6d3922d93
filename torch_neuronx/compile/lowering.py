"""The lowering stage: every compiled graph lowered to StableHLO with torch-mlir, failing where Trainium fails.

TorchNeuron compiles a graph by importing it with torch-mlir's FX importer and lowering it to
StableHLO, which neuronx-cc compiles to a NEFF. An op torch-mlir cannot legalize fails the whole
graph at compile time, on Trainium. The emulator executes Inductor's host code (fast, zero-copy), so
this stage runs the same lowering on each forward, backward and inference graph before it is compiled
for the host: a graph that would not compile on Trainium does not compile here, with the op, the
line of the user's code that made it, and the fixes; the StableHLO is the artifact a Neuron user
inspects (artifacts.py) and is cached with the compiled graph (neff_cache.py: a warm cache lowers
nothing again).

What is lowered is the graph as TorchNeuron presents it to torch-mlir, a copy of the executed graph
(`prepare`, taken before host_graph.py retargets it) with TorchNeuron's FX passes:
  - None outputs removed (RemoveNoneOutputs: a backward's gradients of inputs that need none);
  - random numbers Inductor draws in the graph, and inputs the graph updates in place, as inputs and
    outputs of the program (RandomOpLegalization, FunctionalizeCopyInplacePass);
  - slice and select positions within the dimension (`x[..., 8:]` traces as end=INT64_MAX, which
    torch-mlir's slice_scatter lowering materialises until memory runs out; negative ones it mis-sizes);
  - ops presented as TorchNeuron's decompositions present them (decompositions.py: the PyTorch
    decompositions it selects, attention as math rather than the host's flash kernel, what only
    Inductor's decompositions make as the ops it stands for), complex values as real pairs
    (complex_ops.py);
  - NKI kernels and collectives cut out of the graph torch-mlir lowers and put back into the StableHLO as
    custom calls (stand_ins.py: an NKI kernel as TorchNeuron's `stablehlo.custom_call @AwsNeuronCustomNativeKernel`);
  - float64 computed as float32, as on the device (TorchNeuron's dtype_conversion_pass); int64 stays
    i64 in StableHLO, as in TorchNeuron (neuronx-cc computes it in 32 bits).
Dropout masks are already graph inputs drawn on the CPU (random_ops.py, RandomOpLegalization).

The switch, TORCHNEURON_LOWERING: `1` (default) lowers every graph; `0` compiles with Inductor only (no
StableHLO, no lowering failures: graphs Trainium rejects compile here); `check` also runs each lowered
program once in StableHLO's reference interpreter and compares it with the executed result
(lowering_check.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import operator
import os
import re
import tempfile
import time
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree

from . import complex_ops, stand_ins
from .errors import NeuronLoweringError

SWITCH = "TORCHNEURON_LOWERING"
aten = torch.ops.aten
prims = torch.ops.prims


def mode() -> str:
    value = os.environ.get(SWITCH, "1").strip().lower()
    if value in ("0", "false", "off", "no"):
        return "off"
    if value == "check":
        return "check"
    if value in ("1", "true", "on", "yes", ""):
        return "on"
    raise NeuronLoweringError(f"{SWITCH}={os.environ[SWITCH]!r} is not a valid value: use 1 (lower every compiled graph "
                              f"to StableHLO, the default), 0 (Inductor only) or check (lower and compare the StableHLO "
                              f"run in the reference interpreter with the executed result).")


@dataclasses.dataclass(frozen=True)
class Lowered:
    """A graph's StableHLO, as text (readable, and parsed again by the interpreter check)."""
    stablehlo: str
    seconds: float = 0.0


@functools.lru_cache(maxsize=1)
def fingerprint() -> str:
    """What a cached lowering depends on beyond the graph: torch-mlir's version and this stage's code."""
    from importlib.metadata import version
    h = hashlib.sha256(f"torch-mlir {version('torch-mlir')}\n".encode())
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("lowering.py", "decompositions.py", "complex_ops.py", "stand_ins.py"):
        with open(os.path.join(here, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()


# ---------------------------------------------------------------- the graph TorchNeuron lowers

def prepare(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of `gm` to lower, taken before the executed graph is rewritten for the host.

    Nodes are copied with their metadata (the device fake tensors, stack traces); constants are shared.
    """
    graph = torch.fx.Graph()
    output = graph.graph_copy(gm.graph, {})
    graph.output(output)
    return torch.fx.GraphModule(gm, graph)


def _kept_op_that_does_not_lower(gm: torch.fx.GraphModule) -> torch.fx.Node | None:
    """The first node that stands for an op TorchNeuron's graph keeps and torch-mlir does not lower
    (decompositions.KEPT_BY_TORCHNEURON_AND_NOT_LOWERED)."""
    from .decompositions import KEPT_BY_TORCHNEURON_AND_NOT_LOWERED
    for node in gm.graph.nodes:
        original = node.meta.get("original_aten")
        if node.op == "call_function" and original is not None and \
                _op_name(original) in KEPT_BY_TORCHNEURON_AND_NOT_LOWERED:
            return node
    return None


def _tensor_outputs_only(gm: torch.fx.GraphModule) -> None:
    """None outputs (a backward's gradients of inputs that need none: TorchNeuron's RemoveNoneOutputs) and
    Python values (a symbolic int the graph returns) are not outputs of a StableHLO program."""
    output = gm.graph.output_node()
    values = output.args[0] if isinstance(output.args[0], (list, tuple)) else (output.args[0],)
    output.args = (tuple(v for v in values if isinstance(v, torch.fx.Node) and
                         isinstance(v.meta.get("val"), torch.Tensor)),)


def _clamp_slice_ends(gm: torch.fx.GraphModule) -> None:
    """slice(x, dim, start, end) and slice_scatter(x, src, dim, start, end) with start and end in [0, size],
    select / select_scatter with a non-negative index: torch-mlir's StableHLO lowering mishandles an end past
    the dimension (end=INT64_MAX, from `x[..., 8:]`, exhausts memory) and negative positions (`x[:, -n:]`,
    `x[:, -1]`: a scatter of mismatched bounds)."""
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target in (aten.select.int, aten.select_scatter.default):  # a negative index, as for slices
            dim_at = 1 if node.target is aten.select.int else 2
            val = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
            index = node.args[dim_at + 1] if len(node.args) > dim_at + 1 else None
            if isinstance(val, torch.Tensor) and isinstance(index, int) and index < 0:
                size = val.shape[node.args[dim_at]]
                if isinstance(size, int):
                    node.args = node.args[:dim_at + 1] + (index + size,) + node.args[dim_at + 2:]
            continue
        if node.target is aten.slice.Tensor:
            dim_at, end_at = 1, 3
        elif node.target is aten.slice_scatter.default:
            dim_at, end_at = 2, 4
        else:
            continue
        args = list(node.args)
        if len(args) < end_at:  # no start given
            continue
        val = args[0].meta.get("val") if isinstance(args[0], torch.fx.Node) else None
        if not isinstance(val, torch.Tensor):
            continue
        dim = args[dim_at] if len(args) > dim_at else 0
        size = val.shape[dim]
        if not isinstance(size, int):
            continue
        for at in (end_at - 1, end_at):  # start, end
            if len(args) > at and isinstance(args[at], int):
                bound = args[at] + size if args[at] < 0 else args[at]
                args[at] = min(max(bound, 0), size)
        node.args = tuple(args)


def _float64_to_float32(x: Any) -> Any:
    if x is torch.float64:
        return torch.float32
    if isinstance(x, (list, tuple)):
        return type(x)(_float64_to_float32(v) for v in x)
    if isinstance(x, dict):
        return {k: _float64_to_float32(v) for k, v in x.items()}
    return x


class _AsTorchNeuronPresentsIt(torch.fx.Interpreter):
    """Runs the graph with float64 arguments as float32 (the device has no float64), and views as reshapes.

    A decomposed kernel's results are contiguous where the host kernel's had other strides (the flash
    attention output), and the graph's views were traced for those strides; StableHLO has no strides,
    and a reshape is a view wherever a view is possible.
    """

    _current = None

    def call_function(self, target, args, kwargs):
        if target in (aten.view.default, aten._unsafe_view.default):
            target = aten.reshape.default
        return super().call_function(target, _float64_to_float32(args), _float64_to_float32(kwargs))


class _ComplexAsRealToo(complex_ops.ComplexAsReal, _AsTorchNeuronPresentsIt):
    """The same, with complex values as real pairs (TORCH_NEURONX_COMPLEX_DECOMPOSE, complex_ops.py)."""

    def __init__(self, gm: torch.fx.GraphModule, packed_inputs: dict[str, bool]):
        super().__init__(gm)
        self._packed_inputs = packed_inputs


def _moves_between_devices(node: torch.fx.Node) -> bool:
    if node.op != "call_function":
        return False
    if node.target is prims.device_put.default:
        return True
    return node.target is aten._to_copy.default and "device" in node.kwargs and \
        set(node.kwargs) <= {"device", "non_blocking", "layout"}


def _drop_device_moves(gm: torch.fx.GraphModule) -> None:
    """Copies between devices as no-ops: StableHLO has no devices, and TorchNeuron's executor copies CPU
    inputs to the device before the program runs (torch-mlir has no lowering of prims.device_put)."""
    for node in list(gm.graph.nodes):
        if _moves_between_devices(node):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)


def _needs_retrace(gm: torch.fx.GraphModule) -> bool:
    from .decompositions import LOWERING_DECOMPOSITIONS
    decompose_complex = complex_ops.enabled()
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in LOWERING_DECOMPOSITIONS:
            return True
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and (val.dtype == torch.float64 or decompose_complex and val.is_complex()):
            return True
    return False


def _retrace(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """The graph traced again through TorchNeuron's decompositions, float64 as float32; node metadata
    (the user's stack traces) carried over."""
    import torch.fx.traceback as fx_traceback
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx
    from .decompositions import LOWERING_DECOMPOSITIONS

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    values = [n.meta.get("val") for n in placeholders]
    mode = detect_fake_mode(values)
    if mode is None:
        from torch._subclasses.fake_tensor import FakeTensorMode
        mode = FakeTensorMode(allow_non_fake_inputs=True)
    packed = {n.target: complex_ops.is_complex_value(v) for n, v in zip(placeholders, values)} \
        if complex_ops.enabled() else {}
    # Every input on the graph's device: TorchNeuron's executor copies CPU inputs there before the program runs.
    device = next((v.device for v in values if isinstance(v, torch.Tensor) and v.device.type != "cpu"), None)
    with mode:
        values = [v.resolve_conj().resolve_neg() if isinstance(v, torch.Tensor) else v for v in values]
        values = [v.to(device) if device is not None and isinstance(v, torch.Tensor) else v for v in values]
        values = [v.to(torch.float32) if isinstance(v, torch.Tensor) and v.dtype == torch.float64 else
                  torch.view_as_real(v) if packed.get(n.target) else v for n, v in zip(placeholders, values)]
    interpreter = _ComplexAsRealToo(gm, packed) if complex_ops.enabled() else _AsTorchNeuronPresentsIt(gm)
    allow, mode.allow_non_fake_inputs = mode.allow_non_fake_inputs, True
    try:
        with fx_traceback.preserve_node_meta(), mode:
            return make_fx(interpreter.run, decomposition_table=LOWERING_DECOMPOSITIONS, tracing_mode="real",
                           _allow_non_fake_inputs=True)(*values)
    finally:
        mode.allow_non_fake_inputs = allow


def _without_devices(x: Any) -> Any:
    return pytree.tree_map_only(torch.device, lambda _: torch.device("cpu"), x)


def _drop_device_arguments(gm: torch.fx.GraphModule) -> None:
    """Factory ops' `device=` arguments as cpu. StableHLO has no devices; torch-mlir folds a factory's
    constant only for a device it knows (scalar_tensor(-1.0, device="neuron:0") stays an f64 literal
    that does not legalize)."""
    for node in gm.graph.nodes:
        if node.op == "call_function":
            node.args = _without_devices(node.args)
            node.kwargs = _without_devices(node.kwargs)


# Inductor's random ops: seeds it draws and the values it draws from them (prims namespace).
_INDUCTOR_RANDOM = ("inductor_random", "inductor_randint", "inductor_seeds")


def _random_values_as_inputs(gm: torch.fx.GraphModule) -> None:
    """Random numbers Inductor draws inside the graph (from its own seeds) as inputs of the program.

    A NEFF draws no random numbers: TorchNeuron passes them in (RandomOpLegalization; the dropout masks of
    random_ops.py already are inputs). What else draws random numbers in a compiled graph (torch.rand,
    dropout replayed by activation checkpointing) reaches the executed graph as Inductor's own random ops;
    the lowered program takes their values as inputs, as TorchNeuron's would.
    """
    def inductor_op(node: torch.fx.Node, names: tuple[str, ...]) -> bool:
        return node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and \
            node.target.namespace == "prims" and node.target._opname in names

    for node in reversed(list(gm.graph.nodes)):  # seeds looked up only for values that become inputs
        if inductor_op(node, ("inductor_random", "inductor_randint")):
            lookup = node.args[1] if len(node.args) > 1 else None
            node.args = node.args[:1] + (None,) + node.args[2:]
            if isinstance(lookup, torch.fx.Node) and inductor_op(lookup, ("inductor_lookup_seed",)) and not lookup.users:
                gm.graph.erase_node(lookup)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    last = placeholders[-1] if placeholders else None
    drawn = [n for n in gm.graph.nodes if inductor_op(n, _INDUCTOR_RANDOM) and n.users]
    for i, node in enumerate(drawn):
        if last is None:
            with gm.graph.inserting_before(next(iter(gm.graph.nodes))):
                value = gm.graph.placeholder(f"random_values_{i}")
        else:
            with gm.graph.inserting_after(last):
                value = gm.graph.placeholder(f"random_values_{i}")
        value.meta.update(node.meta)
        last = value
        node.replace_all_uses_with(value)
        gm.graph.erase_node(node)
    for node in reversed(list(gm.graph.nodes)):
        if inductor_op(node, _INDUCTOR_RANDOM) and not node.users:
            gm.graph.erase_node(node)


def _new_input(gm: torch.fx.GraphModule, name: str, value: Any) -> torch.fx.Node:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    where = gm.graph.inserting_after(placeholders[-1]) if placeholders else \
        gm.graph.inserting_before(next(iter(gm.graph.nodes)))
    with where:
        node = gm.graph.placeholder(name)
    node.meta["val"] = value
    return node


def _rng_state_ops_unwrapped(gm: torch.fx.GraphModule) -> None:
    """Activation checkpointing's `run_and_save_rng_state(op, ...)` / `run_with_rng_state(state, op, ...)` (so
    that the backward replays the forward's random numbers) as `op(...)`, the saved generator state as an input:
    in the lowered program every random number comes from outside (dropout masks: `_native_dropout_as_masks`)."""
    from torch._prims.rng_prims import run_and_save_rng_state, run_with_rng_state
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in (run_and_save_rng_state, run_with_rng_state):
            continue
        saves = node.target is run_and_save_rng_state
        op, op_args = (node.args[0], node.args[1:]) if saves else (node.args[1], node.args[2:])
        with gm.graph.inserting_before(node):
            call = gm.graph.call_function(op, tuple(op_args), dict(node.kwargs))
        for key in ("stack_trace", "nn_module_stack", "seq_nr"):
            if key in node.meta:
                call.meta[key] = node.meta[key]
        call.meta["val"] = _fake_run(op, op_args, node.kwargs)
        if saves:
            for user in list(node.users):
                if user.op == "call_function" and user.target is operator.getitem:
                    user.replace_all_uses_with(call if user.args[1] == 1 else
                                               _new_input(gm, f"{node.name}_rng_state", user.meta.get("val")))
                    gm.graph.erase_node(user)
        else:
            node.replace_all_uses_with(call)
        gm.graph.erase_node(node)


def _fake_run(op: Any, args: Any, kwargs: dict) -> Any:
    """The value `op` makes from the graph's values (their fake tensors)."""
    from torch._guards import detect_fake_mode
    values = torch.fx.node.map_arg((args, kwargs), lambda n: n.meta.get("val"))
    mode = detect_fake_mode(values)
    if mode is None:
        return None
    with mode:
        return op(*values[0], **values[1])


def _native_dropout_as_masks(gm: torch.fx.GraphModule) -> None:
    """`native_dropout(x, p, train)` left in the graph (replayed by activation checkpointing) as TorchNeuron's
    RandomOpLegalization makes it: x * mask * 1/(1-p), the mask an input of the program."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not aten.native_dropout.default:
            continue
        x, p = node.args[0], float(node.args[1])
        value = x.meta["val"]
        mask = _new_input(gm, f"{node.name}_mask", value.new_empty(value.shape, dtype=torch.bool))
        with gm.graph.inserting_before(node):
            scaled = gm.graph.call_function(aten.mul.Tensor, (gm.graph.call_function(
                prims.convert_element_type.default, (mask, value.dtype)), 1.0 / (1.0 - p) if p < 1 else 0.0))
            out = gm.graph.call_function(aten.mul.Tensor, (x, scaled))
        for new in (scaled.args[0], scaled, out):
            new.meta["val"] = value
            if "stack_trace" in node.meta:
                new.meta["stack_trace"] = node.meta["stack_trace"]
        for user in list(node.users):
            if user.op == "call_function" and user.target is operator.getitem:
                user.replace_all_uses_with(out if user.args[1] == 0 else mask)
                gm.graph.erase_node(user)
        gm.graph.erase_node(node)


def _input_mutations_as_outputs(gm: torch.fx.GraphModule) -> None:
    """`copy_(input, new_value)` (AOTAutograd's epilogue for an input the graph updates in place, e.g. a
    static KV cache) as one more output: StableHLO values are immutable; TorchNeuron returns the new
    value and aliases it to the input (FunctionalizeCopyInplacePass, mhlo.input_output_alias)."""
    updates = []
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is aten.copy_.default and \
                isinstance(node.args[0], torch.fx.Node) and node.args[0].op == "placeholder":
            node.replace_all_uses_with(node.args[1])
            updates.append(node.args[1])
            gm.graph.erase_node(node)
    if updates:
        output = gm.graph.output_node()
        values = output.args[0] if isinstance(output.args[0], (list, tuple)) else (output.args[0],)
        output.args = (tuple(values) + tuple(updates),)


def _specialize_symbolic_ints(gm: torch.fx.GraphModule) -> None:
    """A symbolic int input (the only one the backend accepts: the static sliding-window cache's token count,
    which no tensor shape depends on, static_shapes.py) as the value it had when the graph was compiled.

    StableHLO programs take tensors; TorchNeuron rejects symbolic ints outright (its DynamicShapeAnalysis).
    The program is lowered for the value seen; the executed graph keeps taking it.
    """
    for node in list(gm.graph.nodes):
        value = node.meta.get("val")
        if node.op == "placeholder" and isinstance(value, torch.SymInt):
            hint = value.node.hint
            if hint is None:
                continue
            node.replace_all_uses_with(int(hint))
            gm.graph.erase_node(node)


def _unsigned_inputs_as_signed(gm: torch.fx.GraphModule) -> None:
    """Program inputs of unsigned 64/32/16-bit integers (the random state CUDA's flash attention returns, passed to
    its backward, which the math backward does not read) as signed ones of the same width: torch-mlir's importer
    has no unsigned dtypes other than uint8."""
    signed = {torch.uint64: torch.int64, torch.uint32: torch.int32, torch.uint16: torch.int16}
    for node in gm.graph.nodes:
        value = node.meta.get("val")
        if node.op == "placeholder" and isinstance(value, torch.Tensor) and value.dtype in signed:
            with value.fake_mode if hasattr(value, "fake_mode") else contextlib.nullcontext():
                node.meta["val"] = torch.empty_strided(value.shape, value.stride(), dtype=signed[value.dtype],
                                                       device=value.device)
            if "tensor_meta" in node.meta:  # the importer reads the type from it first
                from torch.fx.passes.shape_prop import _extract_tensor_metadata
                node.meta["tensor_meta"] = _extract_tensor_metadata(node.meta["val"])


def as_torchneuron_presents_it(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """TorchNeuron's post-AOT FX passes on the copy made by `prepare` (in place where possible)."""
    _tensor_outputs_only(gm)
    _specialize_symbolic_ints(gm)
    _random_values_as_inputs(gm)
    stand_ins.cut(gm)  # NKI kernels and collectives, put back as custom calls once lowered
    _rng_state_ops_unwrapped(gm)
    _native_dropout_as_masks(gm)
    _input_mutations_as_outputs(gm)
    if _needs_retrace(gm):
        gm.recompile()
        meta, gm = gm.meta, _retrace(gm)  # inputs and outputs keep their positions
        gm.meta.update(meta)
    _clamp_slice_ends(gm)
    _unsigned_inputs_as_signed(gm)
    # last: the values the nodes' metadata describe stay on their devices
    _drop_device_moves(gm)
    _drop_device_arguments(gm)
    gm.recompile()
    return gm


# ---------------------------------------------------------------- torch-mlir

# torch-mlir's passes from its FX import to StableHLO, as TorchNeuron runs them (less its own Neuron
# pipeline, from AWS's torch-mlir fork: custom Neuron lowerings ahead of the same legalization).
TO_TORCH_BACKEND = ("builtin.module(func.func(torch-match-quantized-custom-ops), "
                    "torchdynamo-export-to-torch-backend-pipeline{extra-library=})")
TO_STABLEHLO = "builtin.module(torch-backend-to-stablehlo-backend-pipeline{allow-non-finites=true})"


def _dense_literals_class() -> type:
    from torch_mlir.extras.fx_importer import FxImporterHooks

    class DenseLiterals(FxImporterHooks):
        """Tensor constants as dense elements (as TorchNeuron's importer hook makes them): torch-mlir's default
        for a constant of more than one element is a resource blob, which XLA's HLO tools (and so
        neuronx-cc) do not read."""

        def resolve_literal(self, gni: Any, literal: Any, info: Any) -> Any:
            import numpy as np
            from torch_mlir import ir
            from torch_mlir.extras.fx_importer import TORCH_DTYPE_TO_MLIR_TYPE
            dtypes = {torch.float32: np.float32, torch.float16: np.float16, torch.int32: np.int32,
                      torch.int64: np.int64, torch.int8: np.int8, torch.uint8: np.uint8}
            if not isinstance(literal, torch.Tensor) or literal.dtype not in dtypes:
                return None
            array = np.array(literal.detach().cpu().tolist(), dtype=dtypes[literal.dtype])
            attr = ir.DenseElementsAttr.get(array, type=TORCH_DTYPE_TO_MLIR_TYPE[literal.dtype](), shape=array.shape)
            return ir.Operation.create(name="torch.vtensor.literal", results=[gni._cc.tensor_to_vtensor_type(literal)],
                                       attributes={"value": attr}).result
    return DenseLiterals


def _DenseLiterals() -> Any:
    return _dense_literals_class()()


class _StderrCapture:
    """MLIR prints its diagnostics on file descriptor 2, not through Python: capture them."""

    def __enter__(self) -> "_StderrCapture":
        import sys
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile(mode="w+b")
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        self.text = ""
        return self

    def __exit__(self, *exc: Any) -> None:
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode("utf-8", "replace")
        self._file.close()


def _run_pipeline(module: Any, pipeline: str) -> None:
    from torch_mlir.passmanager import PassManager
    with module.context as ctx:
        # As torch-mlir does: passes may emit an error without failing, which the bindings would not report.
        ctx.emit_error_diagnostics = True
        PassManager.parse(pipeline).run(module.operation)


STAGES = ("raw", "torch", "stablehlo")  # torch-mlir's FX import; its Torch backend contract; StableHLO


def to_mlir(gm: torch.fx.GraphModule, stage: str = "stablehlo") -> str:
    """MLIR text of a graph at `stage`; raises _LoweringFailed with MLIR's diagnostics.

    The StableHLO is what the lowering stage caches and writes: f64 as f32, no debug locations.
    """
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_dialect
    from torch_mlir.extras.fx_importer import FxImporter
    if stage not in STAGES:
        raise ValueError(f"MLIR stage {stage!r}: use one of {', '.join(STAGES)}")
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    context = ir.Context()
    torch_dialect.register_dialect(context)
    capture = _StderrCapture()
    step = "importing the FX graph"
    try:
        # tensor constants are read as real tensors, outside the compiler's fake-tensor mode
        with capture, unset_fake_temporarily():
            importer = FxImporter(context=context, hooks=_DenseLiterals())
            importer.import_stateless_graph(gm.graph, func_name="main")
            module = importer.module
            if stage != "raw":
                step = "lowering Torch IR to the Torch backend contract"
                _run_pipeline(module, TO_TORCH_BACKEND)
            if stage == "stablehlo":
                step = "lowering to StableHLO"
                _run_pipeline(module, TO_STABLEHLO)
    except Exception as e:
        left = _torch_ops_left(module) if step != "importing the FX graph" else []
        raise _LoweringFailed(step, f"{type(e).__name__}: {e}", capture.text, left) from e
    if stage == "stablehlo" and gm.meta.get(stand_ins.META_KEY):
        stand_ins.stitch(module, gm.meta[stand_ins.META_KEY])
    text = module.operation.get_asm(enable_debug_info=False)
    return _float64_as_float32(text, context) if stage == "stablehlo" else text


_F64 = re.compile(r"(?:(?<=[^\w])|(?<=[\d?]x))f64\b")  # f64 as a type: `: f64`, `tensor<f64>`, `tensor<2x3xf64>`


def _float64_as_float32(text: str, context: Any) -> str:
    """TorchNeuron's dtype_conversion_pass: f64 (Python float constants, as torch-mlir types them) as f32.

    Kept as f64 if the f32 module does not parse (a constant beyond float32's range).
    """
    if not _F64.search(text):
        return text
    converted = _F64.sub("f32", text)
    from torch_mlir import ir
    try:
        with _StderrCapture():
            ir.Module.parse(converted, context)
    except Exception:
        return text
    return converted


class _LoweringFailed(Exception):
    def __init__(self, stage: str, error: str, diagnostics: str, left: list[str] | None = None):
        super().__init__(error)
        self.stage, self.error, self.diagnostics = stage, error, diagnostics
        self.left = left or []  # ATen ops still in the module where the pass pipeline stopped


def _torch_ops_left(module: Any) -> list[str]:
    """`aten.x` of each ATen op left unconverted in `module`, in order (the diagnostic may name only a constant
    the op consumes: "failed to legalize operation 'torch.constant.int'")."""
    names: list[str] = []

    def walk(op: Any) -> None:
        name = op.operation.name
        if name == "torch.operator":
            name = str(op.operation.attributes["name"]).strip('"')
        if name.startswith(("torch.aten.", "torch.prims.")) and name[len("torch."):] not in names:
            names.append(name[len("torch."):])
        for region in op.operation.regions:
            for block in region:
                for inner in block:
                    walk(inner)
    try:
        walk(module.operation)
    except Exception:
        return names
    return names


# ---------------------------------------------------------------- the stage

def lower(view: torch.fx.GraphModule, kind: str) -> Lowered:
    """Lower the copy `prepare` made of a graph; NeuronLoweringError if Trainium could not compile it."""
    from . import artifacts, stats
    start = time.perf_counter()
    kept = _kept_op_that_does_not_lower(view)  # before the retrace, which renames what ops stand for
    if kept is not None:
        name = _op_name(kept.meta["original_aten"])
        raise lowering_error(view, _LoweringFailed(
            "lowering to StableHLO", f"{_packet(name)} has no StableHLO lowering",
            f"error: failed to legalize operation 'torch.{_packet(name)}' (TorchNeuron's graph keeps it; the executed graph "
            f"has Inductor's decomposition of it)")) from None
    try:
        graph = as_torchneuron_presents_it(view)
    except complex_ops.UnsupportedComplexOp as e:
        raise complex_op_error(e) from None
    paths = artifacts.save_fx_graph(graph, kind)
    try:
        text = to_mlir(graph)
    except _LoweringFailed as failure:
        raise lowering_error(graph, failure, paths) from None
    artifacts.save_stablehlo(text, kind)
    seconds = time.perf_counter() - start
    stats.record_lowering(seconds)
    return Lowered(text, seconds)


# The op of "failed to legalize operation 'torch.aten.erfinv'", or of a `torch.operator` (an op torch-mlir has
# no definition for: <{name = "torch.aten._fft_r2c"}>, <{name = "torch.transformers.grouped_mm_fallback"}>).
_FAILED_OPERATOR = re.compile(r'failed to legalize operation \'torch\.operator\'[^\n]*?name = "torch\.([\w.]+)"')
_FAILED_OP = re.compile(r"""failed to legalize operation 'torch\.([\w.]+)'""")
_ANY_OP = re.compile(r"""(?:name = "|operation ')torch\.((?:aten|prims|higher_order)\.[\w.]+)""")


def _failed_op(text: str) -> str | None:
    match = _FAILED_OPERATOR.search(text)
    if match:
        return match.group(1)
    match = _FAILED_OP.search(text)
    if match and match.group(1) != "operator":
        return match.group(1)
    match = _ANY_OP.search(text)
    return match.group(1) if match else None


def _node_of(graph: torch.fx.GraphModule, op: str | None) -> torch.fx.Node | None:
    if op is None:
        return None
    for node in graph.graph.nodes:
        if node.op == "call_function":
            name = _op_name(node.target)
            if name == op or name.rsplit(".", 1)[0] == op:
                return node
    return None


def _packet(name: str) -> str:
    """`aten.erfinv` of `aten.erfinv.default`."""
    return ".".join(name.split(".")[:2])


def _op_name(target: Any) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order.{target.name()}"
    return getattr(target, "__name__", str(target))


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


def user_line(node: torch.fx.Node | None) -> str | None:
    """The innermost frame of the code that made `node` (from Dynamo's stack trace), as `file:line in f: code`."""
    trace = node.meta.get("stack_trace") if node is not None else None
    frames = _FRAME.findall(trace or "")
    if not frames:
        return None
    path, line, function, code = frames[-1]
    return f"{path}:{line} in {function}: {code.strip()}"


# The first location of MLIR's diagnostic: loc("file":line:col) or loc(callsite("file":line:col at ...
_DIAGNOSTIC_LOCATION = re.compile(r'loc\((?:callsite\()?"([^"]+)":(\d+):\d+')


def _node_at_location(graph: torch.fx.GraphModule, text: str) -> torch.fx.Node | None:
    """The first ATen node made at the source line the diagnostic names (when it names no ATen op, only one of
    the constants torch-mlir made for it: `torch.constant.int`)."""
    match = _DIAGNOSTIC_LOCATION.search(text)
    if not match:
        return None
    for node in graph.graph.nodes:
        frames = _FRAME.findall(node.meta.get("stack_trace") or "")
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and frames and \
                frames[-1][0] == match.group(1) and frames[-1][1] == match.group(2):
            return node
    return None


def lowering_error(graph: torch.fx.GraphModule, failure: _LoweringFailed,
                   paths: dict[str, str] | None = None) -> NeuronLoweringError:
    from .backend import FALLBACK_SWITCH
    op = _failed_op(failure.diagnostics) or _failed_op(failure.error)
    node = _node_of(graph, op) or _kept_op_that_does_not_lower(graph)
    if node is None and (op is None or not op.startswith(("aten.", "prims.", "higher_order."))):
        if failure.left:  # the ATen ops the pipeline could not convert, in program order
            op = failure.left[0]
            node = _node_of(graph, op)
        else:
            node = _node_at_location(graph, failure.diagnostics)
            op = _packet(_op_name(node.target)) if node is not None else op
    if node is None and failure.stage == "importing the FX graph":
        node = _unimportable_node(graph)
        if node is not None:  # an op that writes its inputs is named, not the auto_functionalized that wraps it
            wrapped = node.args[0] if node.args and isinstance(node.args[0], torch._ops.OpOverload) else None
            op = _packet(_op_name(wrapped)) if wrapped is not None else _op_name(node.target)
    original = node.meta.get("original_aten") if node is not None else None
    shown = op or "an op"
    if original is not None and _packet(_op_name(original)) != _packet(op or ""):
        shown += f" (from {_packet(_op_name(original))})"
    where = user_line(node)
    lines = [f"Neuron backend NEFF execution setup failed: {shown} does not lower to StableHLO, so this graph cannot "
             f"compile for Trainium (torch-mlir, {failure.stage}).",
             f"  made by: {where}" if where else "  made by: (no source line recorded for this op)",
             "  fixes: rewrite that code with ops that lower (see docs/compile.md, \"Ops that do not lower\"); or move it "
             "out of the compiled region (torch.compiler.disable, or compute it before calling the compiled "
             f"function); or set {FALLBACK_SWITCH}=0 to run this graph eagerly on neuron instead of compiling it."]
    if paths:
        lines.append(f"  FX graph: {paths.get('fx')}")
    diagnostics = failure.diagnostics.strip() or failure.error
    lines.append("  torch-mlir: " + _short(diagnostics))
    return NeuronLoweringError("\n".join(lines), op=op, location=where, diagnostics=diagnostics)


def complex_op_error(e: complex_ops.UnsupportedComplexOp) -> NeuronLoweringError:
    from .backend import FALLBACK_SWITCH
    where = user_line(e.node)
    message = (f"Neuron backend NEFF execution setup failed: {e.op} on complex tensors does not lower to StableHLO, "
               f"so this graph cannot compile for Trainium (complex ops are decomposed into real ones before "
               f"lowering, {complex_ops.SWITCH}; this one has no decomposition).\n"
               f"  made by: {where or '(no source line recorded for this op)'}\n"
               f"  fixes: compute it on real tensors (torch.view_as_real: real and imaginary parts as a last "
               f"dimension of 2); or move it out of the compiled region (torch.compiler.disable); or set "
               f"{FALLBACK_SWITCH}=0 to run this graph eagerly on neuron instead of compiling it.")
    return NeuronLoweringError(message, op=e.op, location=where)


def _unimportable_node(graph: torch.fx.GraphModule) -> torch.fx.Node | None:
    """The first node the FX importer cannot take (an op that is no ATen op: a higher-order op)."""
    for node in graph.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator):
            return node
    return None


def _short(text: str, limit: int = 1500) -> str:
    """MLIR's diagnostics without the long location chains, at most `limit` characters."""
    text = re.sub(r"^.*?\b(error|warning|note): ", r"\1: ", text, flags=re.MULTILINE)  # MLIR's location chains
    text = re.sub(r"\n\s*\n", "\n", text).strip()
    return text if len(text) <= limit else text[:limit - 3] + "..."
