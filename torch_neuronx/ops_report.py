"""Op tracking, as TorchNeuron reports it: which ops would run on the NeuronCore on Trainium, which on the
CPU, and how many distinct eager op signatures Trainium would compile.

get_executed_ops() / get_fallback_ops() are TorchNeuron's API: lists of op names ("aten::linear",
"aten::normal_") recorded since the last clear_op_tracking(). The classification is the real plugin's:
an op it registers a Neuron kernel for runs on the NeuronCore (registered_ops.py: its 193 ATen ops,
extracted from its source), every other op takes its boxed CPU fallback, random ops included. What is
recorded is what Trainium would run (csrc/aten/native/OpTracking.h): composite ops it registers as one
kernel (linear, embedding, ones, full, stack, _foreach_*, _fused_rms_norm, convolution, ...) as
themselves, allocation and copy ops as its C++ kernels record them (aten::empty, empty_strided, clone,
copy_, _to_copy, resize_, _local_scalar_dense, set_), views not at all. The emulator runs every op on the
host either way; its own per-op counts are get_op_counts() and get_emulator_op_counts().

Switches (docs/fidelity.md):
  TORCHNEURON_CPU_FALLBACK=error  an op that runs on the CPU on Trainium raises, naming it (default allow);
  NEURON_FALLBACK_ENABLED, TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS  TorchNeuron's recovery on the
      CPU after a Neuron compile or execution failure of an eager op; the emulator has no such failures
      (its eager ops run host kernels, whose errors are the op's own, as on CPU), so they change nothing:
      their values are checked, and NEURON_FALLBACK_ENABLED=0 (this plugin's old switch for what
      TORCHNEURON_CPU_FALLBACK=error does now) says so once.
"""

from __future__ import annotations

import os
import warnings

import torch

from . import _C
from .registered_ops import RECORDS_ITS_PARTS, REGISTERED_OPS, REGISTERED_OVERLOADS


def get_fallback_ops() -> list[str]:
    """Ops that would run on the CPU on Trainium since the last clear_op_tracking(): a list of op names
    ("aten::normal_"), as TorchNeuron's. Ops with no Neuron kernel in TorchNeuron take its CPU fallback."""
    return _C._fallback_ops()


def get_executed_ops() -> list[str]:
    """Ops that would run on the NeuronCore on Trainium since the last clear_op_tracking(): a list of op
    names ("aten::linear", "aten::add.Tensor"), as TorchNeuron's."""
    return _C._executed_ops()


def clear_op_tracking() -> None:
    """Forget the ops recorded so far, and reset the counts below (calls, signatures, emulator counts) and the
    steps of the "shapes keep changing" rule (module calls count as steps again until an optimizer step)."""
    _C._clear_op_tracking()
    _C._reset_fallback_counts()
    _C._reset_op_signatures()
    _module_calls.install()


def _sorted(pairs) -> dict[str, int]:
    return dict(sorted(pairs, key=lambda kv: (-kv[1], kv[0])))


def get_op_counts() -> dict[str, int]:
    """Calls of each op a NeuronCore or TorchNeuron's CPU fallback would run (the ops of the fallback and of
    the emulator's host kernels), most frequent first. Ours: TorchNeuron reports names without counts."""
    return _sorted(_C._op_calls())


def get_op_signature_counts() -> dict[str, int]:
    """Distinct signatures (input shapes and dtypes) of each op: how many times Trainium's eager mode
    would compile it. A count that grows step after step means recompiles (docs/fidelity.md)."""
    return _sorted(_C._op_signature_counts())


def get_emulator_op_counts() -> dict[str, int]:
    """The emulator's own accounting: ops that took its generic host path (csrc/aten/native/
    Fallback.cpp) rather than a dedicated kernel. Says nothing about Trainium."""
    return _sorted(_C._fallback_counts())


def reset_op_counts() -> None:
    """Deprecated: use clear_op_tracking() (TorchNeuron's name). Removed in the next release."""
    warnings.warn("torch_neuronx.reset_op_counts() is deprecated; use torch_neuronx.clear_op_tracking()",
                  DeprecationWarning, stacklevel=2)
    clear_op_tracking()


def _flag(name: str, default: str) -> bool:
    value = os.environ.get(name, default).strip().lower()
    if value not in ("0", "1", "false", "true"):
        warnings.warn(f"{name}={value!r} is not 0 or 1; using {default}")
        value = default
    return value in ("1", "true")


def _cpu_fallback_allowed() -> bool:
    value = os.environ.get("TORCHNEURON_CPU_FALLBACK", "allow").strip().lower()
    if value not in ("allow", "error"):
        raise ValueError(f"TORCHNEURON_CPU_FALLBACK={value!r}: use 'allow' (the default: ops without a Neuron "
                         "kernel run on the CPU, as on Trainium) or 'error' (they raise, naming the op)")
    return value == "allow"


def _check_recovery_switches() -> None:
    _flag("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS", "0")
    if not _flag("NEURON_FALLBACK_ENABLED", "1"):
        warnings.warn("NEURON_FALLBACK_ENABLED=0 turns off TorchNeuron's recovery on the CPU after a Neuron compile "
                      "or execution failure of an eager op; the emulator has no such failures, so it changes "
                      "nothing. To make ops that run on the CPU on Trainium raise, set TORCHNEURON_CPU_FALLBACK=error.")


# --- the "shapes keep changing" rule's steps (csrc/aten/native/OpSignatures.h) -------------------------------


def _end_of_optimizer_step(optimizer, args, kwargs) -> None:
    if _module_calls.handles:
        _module_calls.remove()
    _C._end_op_signature_step()


class _TopLevelModuleCalls:
    """Until the first optimizer step, a step of the rule is a top-level module call (a model's forward:
    one generated token, one eval batch). Global module hooks, removed at the first optimizer step: they cost
    every module call a few microseconds (PyTorch's hook path instead of its fast path), which inference pays."""

    def __init__(self) -> None:
        self.depth = 0
        self.handles = []
        self.compiling = False

    def install(self) -> None:
        if self.handles or self.compiling:
            return
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
        self.depth = 0
        self.handles = [register_module_forward_pre_hook(self._enter),
                        register_module_forward_hook(self._leave, always_call=True)]

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def compile_started(self, _callback_args=None) -> None:
        """Dynamo starts compiling a frame (a start callback of torch._dynamo.callback_handler): from now on the
        process runs compiled code, whose steps are its graphs, and the hooks go for good. Left in place, Dynamo
        would trace them into every graph and guard on their count, so removing them at the first optimizer step
        would recompile each graph once (and torch warns on each call of a torch.compile'd module)."""
        self.compiling = True
        self.remove()

    def _enter(self, module, args) -> None:
        self.depth += 1

    def _leave(self, module, args, output) -> None:
        self.depth -= 1
        if self.depth == 0:
            _C._end_op_signature_module_call()


_module_calls = _TopLevelModuleCalls()

def _ops_run_on_neuron() -> tuple[set[str], dict[str, str]]:
    """REGISTERED_OPS, and the in-place ops that reach a registered out= overload on Trainium: a structured
    in-place op with no kernel of its own there (`tril_`) runs PyTorch's generated default-backend kernel,
    which calls its out= variant (`tril.out`, registered), so a NeuronCore runs it and op tracking reports
    the out= overload (the second result: "aten::tril_" -> "aten::tril.out")."""
    ops = set(REGISTERED_OPS)
    reported_as = {}
    for full in REGISTERED_OVERLOADS:
        name, _, overload = full.partition(".")
        if overload != "out" and not overload.endswith("_out"):
            continue
        inplace = name + "_" + (f".{overload[:-4]}" if overload.endswith("_out") else "")
        if inplace in REGISTERED_OVERLOADS:  # a kernel of its own there (index_add_): reported as itself
            continue
        try:
            structured = torch._C._dispatch_has_kernel_for_dispatch_key(inplace, "CompositeExplicitAutogradNonFunctional")
        except RuntimeError:  # no such op in this torch
            continue
        if structured:
            ops.add(name + "_")
            reported_as[inplace] = full
    return ops, reported_as


_registered, _reported_as = _ops_run_on_neuron()
_C._set_registered_ops(sorted(_registered), _reported_as)
_C._track_registered_composites(sorted(REGISTERED_OVERLOADS), sorted(RECORDS_ITS_PARTS))
_C._set_cpu_fallback_allowed(_cpu_fallback_allowed())
_check_recovery_switches()
from torch.optim.optimizer import register_optimizer_step_post_hook  # noqa: E402

register_optimizer_step_post_hook(_end_of_optimizer_step)
_module_calls.install()
