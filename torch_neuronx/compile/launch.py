"""Run a compiled graph on a NeuronCore: Inductor's host code, working directly on device memory.

Inductor compiles the retargeted graph (host_graph.py) into a Python wrapper
that allocates buffers, calls fused C++ kernels and calls ATen for the rest
(matmuls, attention). Each piece already works on neuron tensors:

  - the C++ kernels take raw data pointers, and a neuron tensor's data pointer
    is host memory (the emulator's; under TORCHNEURON_STRICT_MEMORY=1 the graph's
    device tensors are opened through the host bridge for the call, see
    `_with_host_access`);
  - ATen calls on neuron tensors reach the device's zero-copy fallback, like
    eager ops (random ops draw from the core's generator there);
  - only the buffer allocator says "cpu". Each compiled graph gets its own copy
    of the wrapper module in which `empty_strided_cpu` allocates on the
    current NeuronCore: the module is loaded with that global set, through
    the attributes Inductor's module loader sets on a loaded wrapper (how
    Inductor gives a module its constants). Inductor's source is not edited,
    and the module is never shared with a plain CPU compile of the same code.

Why not a wrapper code generator of our own (register_backend_for_device, as
PyTorch's torch_openreg does)? Inductor compiles the retargeted host graph, a
"cpu" graph (host_graph.py says why), and Inductor picks the wrapper code
generator by the graph's device: ours would have to be registered for "cpu",
changing every CPU compile of the process. Device "neuron" has its own
registration (inductor_device.py), for graphs that reach Inductor unretargeted.

So the graph runs on the caller's device tensors as they are: intermediate
buffers and outputs are device memory, counted against the core's HBM, and
inputs are released as soon as the wrapper is done with them (its boxed
calling convention), exactly as the same graph does on CPU.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import torch
from torch._inductor.output_code import OutputCode

from .errors import NeuronCompileError
from .host_graph import HostGraphPlan
from .. import _C

# The global of Inductor's Python wrapper that its code allocates buffers with (torch 2.13), and the
# line of the wrapper's header that binds it.
HOST_ALLOCATOR = "empty_strided_cpu"
_HOST_ALLOCATOR_BINDING = f"{HOST_ALLOCATOR} = torch._C._dynamo.guards._empty_strided_cpu"


def empty_strided_device(size: Sequence[int], stride: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A buffer of a compiled graph, on the current NeuronCore (NeuronGraph makes the graph's core current)."""
    return torch.empty_strided(size, stride, dtype=dtype, device="neuron")


def device_of_graph(device_index: int) -> Callable[..., torch.device]:
    """The wrapper's `device` (torch.device): what it names "cpu" is the graph's NeuronCore.

    The retargeted graph says "cpu" for the device, and Inductor writes it into the ATen calls it makes for
    ops its C++ code cannot do (a complex `full` of pad_sequence, say: `device=device(type='cpu')`). Those
    tensors are device tensors as the graph's buffers are, or the next op mixes devices.
    """
    graph_device = torch.device("neuron", device_index)

    def device(*args: Any, **kwargs: Any) -> torch.device:
        d = torch.device(*args, **kwargs)
        return graph_device if d.type == "cpu" else d
    return device


def _with_host_access(call: Callable[[list[Any]], Sequence[Any]], constants: list[torch.Tensor]):
    """`call` with its device tensors opened through the host bridge: inputs and constants, and in a
    host-access scope every allocation made during the call (its buffers, and the outputs of the ATen
    calls in it).

    The graph's C++ kernels read and write device memory on the host; a runtime that guards host
    access (strict memory) must see them open for the call.
    """
    from .. import _C

    def call_with_host_access(args: list[Any]) -> Sequence[Any]:
        access = _C._HostAccess()
        for t in (*args, *constants):
            if isinstance(t, torch.Tensor):
                access.open(t)
        _C._begin_host_access_scope()
        try:
            return call(args)
        finally:
            _C._end_host_access_scope()
            access.close()
    return call_with_host_access


class _DeviceModule:
    """What maybe_realign_inputs reads and rewrites of a compiled graph: its callable."""

    def __init__(self, call: Callable[[list[Any]], Sequence[Any]], defers_input_alignment: bool):
        self.current_callable = call
        self._defers_input_alignment = defers_input_alignment


def device_callable(compiled: Any, device_index: int) -> Callable[[list[Any]], Sequence[Any]]:
    """The boxed callable of Inductor's compiled graph, with its buffers allocated in device memory."""
    from torch._inductor.codecache import PyCodeCache, get_hash, get_path
    from torch._inductor.output_code import maybe_realign_inputs
    from torch._inductor.utils import BoxedBool

    source = getattr(compiled, "source_code", None)
    if source is None:
        # A graph without operations (e.g. the backward of `x + 1` only returns its incoming grad):
        # compile_fx_inner returns the FX module's own boxed forward, which has nothing to allocate
        # or compute and passes the device tensors through as they are.
        return compiled
    if _HOST_ALLOCATOR_BINDING not in source:
        raise NeuronCompileError(f"Inductor's wrapper code no longer binds `{HOST_ALLOCATOR}` as expected by "
                                 "torch_neuronx (built for torch 2.13): cannot place its buffers in device memory")
    key, _, path = get_path(get_hash(source.strip(), "", "code"), "py")
    # Written (or verified) by this user in the checked-private kernel directory: the module that runs
    # is exactly this source, never a file someone else left at that path.
    from .neff_cache import inductor_dir
    from .cache_trust import install_private_file
    root = inductor_dir()
    path = install_private_file(root, os.path.relpath(os.path.realpath(path), root), source.encode("utf-8"))
    device = torch.device("neuron", device_index)
    # Tensor constants of the graph were copied to the host by the retargeting: they are device
    # tensors again for the device code (extern kernels see them next to device buffers).
    constants = {**(getattr(compiled, "constants", None) or {}),
                 **(getattr(compiled, "opaque_value_type_classes", None) or {})}
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():  # real copies: the compiler calls this inside its fake-tensor mode
        attrs = {name: value.to(device) if isinstance(value, torch.Tensor) and value.device.type == "cpu" else value
                 for name, value in constants.items()}
    # A module of its own (loaded with attributes, so never shared through PyCodeCache's module cache):
    # the same source compiled for CPU by plain Inductor keeps host buffers, and two graphs with the
    # same code may have different constants. Set after the module body ran, the allocator global
    # replaces the host one for every call.
    attrs[HOST_ALLOCATOR] = empty_strided_device
    attrs["device"] = device_of_graph(device_index)  # bound by the wrapper's `from torch import device`
    module = PyCodeCache.load_by_key_path(key, path, compiled.cache_linemap, attrs)
    holder = _DeviceModule(module.call, getattr(compiled, "_defers_input_alignment", False))
    # Inputs Inductor assumed aligned but that are not, and that the graph mutates, need the same
    # copy-in/copy-out wrapper Inductor's post_compile gives the host module.
    maybe_realign_inputs(BoxedBool(False), holder, compiled.inputs_to_check, compiled.mutated_input_idxs)
    from .. import _C
    if _C._guards_host_access():
        return _with_host_access(holder.current_callable, [v for v in attrs.values() if isinstance(v, torch.Tensor)])
    return holder.current_callable


AUTOCOPY_DISABLE_ENV = "TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY"
RETAIN_DEVICE_ENV = "TORCH_NEURONX_RETAIN_DEVICE_MODE"


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "0").strip().lower() in ("1", "true", "yes")


class InputPlacement:
    """Where a compiled graph's inputs come from and where its outputs go, as TorchNeuron's executor decides.

    CPU tensor inputs (a CPU model's parameters, CPU batches) are copied to the graph's NeuronCore,
    unless TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY=1 (then they are an error); outputs stay on the
    device, unless TORCH_NEURONX_RETAIN_DEVICE_MODE=1 (then they go to the inputs' device, which must
    be one). A copied input the graph updates in place (BatchNorm's running statistics) is written
    back to the caller's tensor.
    """

    def __init__(self, args: list[Any], device_index: int, mutated_inputs: Sequence[int]):
        self._retain_device = None
        if _env_flag(RETAIN_DEVICE_ENV):
            self._retain_device = _single_input_device(args)
        self._written_back: list[tuple[torch.Tensor, torch.Tensor]] = []
        copies = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.device.type == "cpu"]
        if copies and _env_flag(AUTOCOPY_DISABLE_ENV):
            raise RuntimeError(f"Input tensor at index {copies[0]} is on cpu device, expected neuron. Move tensor to "
                               f"Neuron device first with tensor.to('neuron')")
        device = torch.device("neuron", device_index)
        for i in copies:
            original = args[i]
            args[i] = original.to(device)
            if i in mutated_inputs:
                self._written_back.append((original, args[i]))

    def restore(self, outputs: list[Any]) -> list[Any]:
        for original, copy in self._written_back:
            original.copy_(copy)
        if self._retain_device is not None:
            outputs = [o.to(self._retain_device) if isinstance(o, torch.Tensor) and o.device.type != self._retain_device
                       else o for o in outputs]
        return outputs


def _single_input_device(args: list[Any]) -> str | None:
    device = None
    for a in args:
        if not isinstance(a, torch.Tensor):
            continue
        if device is None:
            device = a.device.type
        elif a.device.type != device:
            from .errors import NEFFExecutionError
            raise NEFFExecutionError(f"cannot mix input devices with {RETAIN_DEVICE_ENV}=1, got {device} and "
                                     f"{a.device.type}")
    return device


class NeuronGraph(OutputCode):
    """A compiled graph, callable with AOTAutograd's boxed calling convention (a list it may clear)."""

    def __init__(self, device_call: Callable[[list[Any]], Sequence[Any]], plan: HostGraphPlan, name: str,
                 mutated_inputs: Sequence[int] = ()):
        # An instance attribute: wrappers (torch._dynamo.disable) copy __dict__, and AOTAutograd
        # checks the wrapper for it to pass the argument list instead of unpacking it.
        self._boxed_call = True
        self._call = device_call
        self.plan = plan
        self.name = name
        self.mutated_inputs = tuple(mutated_inputs)

    def __call__(self, args: list[Any]) -> list[Any]:
        placement = InputPlacement(args, self.plan.device_index, self.mutated_inputs)
        outputs = self._run(args)
        return placement.restore(self._place_outputs(outputs))

    def _run(self, args: list[Any]) -> list[Any]:
        plan = self.plan
        # Neuron's eager dtype rules (int64 range, float64 rounding) stay out of the compiled graph:
        # Inductor's code calls ATen ops of its own (dropout seeds over the whole int64 range).
        in_graph = _C._set_in_compiled_graph(True)
        try:
            if torch.neuron.current_device() != plan.device_index:
                with torch.neuron.device(plan.device_index):
                    outputs = self._call(args)
            else:
                outputs = self._call(args)
        finally:
            _C._set_in_compiled_graph(in_graph)
        return list(outputs)

    def _place_outputs(self, outputs: list[Any]) -> list[Any]:
        """Outputs on the device the traced graph put them on.

        Retargeted to the host, a copy between devices is a no-op for Inductor: a value the graph
        moved to the CPU is a device buffer here, and an input it moved to the device may be
        returned as the input itself. Both are rare; each is one copy.
        """
        plan = self.plan
        for i in plan.host_outputs:
            out = outputs[i]
            if isinstance(out, torch.Tensor) and out.device.type != "cpu":
                outputs[i] = out.cpu()
        for i in plan.device_outputs:
            out = outputs[i]
            if isinstance(out, torch.Tensor) and out.device.type == "cpu":
                outputs[i] = out.to(torch.device("neuron", plan.device_index))
        return outputs

    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        pass

    def prepare_for_serialization(self) -> None:
        # Persistence is the NEFF cache's job (neff_cache.py), not AOTAutograd's cache.
        raise NotImplementedError("neuron graphs are persisted by the NEFF cache")
