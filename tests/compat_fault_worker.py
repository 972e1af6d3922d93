"""The compat worker with a real failure injected into chosen architectures (tests/test_compat.py).

    torchneuron compat --worker compat_fault_worker ...   (tests/ on PYTHONPATH)

TORCHNEURON_COMPAT_FAULT="llama:hang,gpt2:missing-op" makes the llama worker
hang in its first neuron step (so the runner's timeout must fire) and the gpt2
worker hit a missing-op error. The tool's tests use it to prove that a
failing, hanging or crashing architecture is reported with the right category
without mocking anything: the worker, the subprocess, the timeout and the
report all run as in a real matrix. The production worker has no hook for
this: the faults live in a CpuReference subclass of this test module.

Faults:
  missing-op  the neuron model's forward raises the dispatcher's missing-kernel error
  mismatch    a neuron weight is nudged, so logits, grads and tokens really differ
  hang        the neuron model's forward sleeps past any timeout
  crash       the neuron model's forward aborts the process (SIGABRT)
  segfault-moving  the process gets SIGSEGV while the model moves to neuron, after the CPU reference passed
  cpu-fail    building the model raises, as an architecture that fails on CPU too
  nan-both    the model's logits (CPU and neuron alike) hold NaN in one vocabulary column, as a model
              whose numbers overflow the same way on every device
  generate-cpu-fail  the model's generate() raises (on CPU too): the generate steps cannot be run
  model-graph-break  the model's forward (on CPU and on neuron alike) ends in a graph break, as the
              code of some models does: every compiled step fails on neuron and on CPU
  neuron-extra-graph-break  as model-graph-break, plus a second graph break on neuron only: the same
              category on both sides, but not the same failure
"""

from __future__ import annotations

import functools
import os
import signal
import time

from torch_neuronx.compat import worker

ENV = "TORCHNEURON_COMPAT_FAULT"
FAULTS = ("missing-op", "mismatch", "hang", "crash", "segfault-moving", "cpu-fail", "nan-both", "generate-cpu-fail",
          "model-graph-break", "neuron-extra-graph-break")


def fault_for(arch: str, faults: tuple[str, ...] = FAULTS) -> str | None:
    """The fault injected into `arch` (an architecture, or a pipeline class), if any, one of `faults`."""
    for item in os.environ.get(ENV, "").split(","):
        name, _, fault = item.strip().partition(":")
        if name == arch and fault:
            if fault not in faults:
                raise ValueError(f"{ENV}: unknown fault {fault!r} (choose from {', '.join(faults)})")
            return fault
    return None


def _failing_forward(forward, fault: str):
    """`forward` that fails as `fault` says when called (functools.wraps: callers read its signature)."""

    @functools.wraps(forward)
    def failing(*args, **kwargs):
        if fault == "missing-op":
            # the exact text PyTorch's dispatcher raises for an op without a kernel
            raise NotImplementedError(
                "Could not run 'aten::_injected_op' with arguments from the 'neuron' backend. "
                f"(injected by {ENV})")
        if fault == "hang":
            while True:
                time.sleep(3600)
        os.abort()  # crash

    return failing


def with_graph_break(forward):
    """`forward`, then a graph break (as a model's own `.tolist()` or logging call makes one)."""
    import torch

    @functools.wraps(forward)  # generate() reads the forward's signature
    def forward_with_break(*args, **kwargs):
        out = forward(*args, **kwargs)
        torch._dynamo.graph_break()
        return out

    return forward_with_break


def with_neuron_graph_break(forward):
    """An op on the input, a graph break, then `forward`: a break of its own (the backend counts a break where it
    ends a graph, so it needs an op before it; the same numbers go on)."""
    import torch

    @functools.wraps(forward)
    def forward_after_another_break(*args, **kwargs):
        kwargs["input_ids"] = kwargs["input_ids"] + 0
        torch._dynamo.graph_break()
        return forward(*args, **kwargs)

    return forward_after_another_break


def with_nan_logits(forward):
    """`forward` whose returned logits hold NaN in vocabulary column 0 (the loss, computed inside, is finite)."""
    import torch

    @functools.wraps(forward)
    def forward_with_nan(*args, **kwargs):
        out = forward(*args, **kwargs)
        column = torch.zeros(out.logits.shape[-1], dtype=torch.bool, device=out.logits.device)
        column[0] = True
        out["logits"] = out.logits.masked_fill(column, float("nan"))
        return out

    return forward_with_nan


def _failing_generate(generate):
    @functools.wraps(generate)
    def failing(*args, **kwargs):
        raise RuntimeError(f"injected generate() failure ({ENV})")

    return failing


class FaultyReference(worker.CpuReference):
    def build_model(self):
        fault = fault_for(self.arch)
        if fault == "cpu-fail":
            raise RuntimeError(f"injected CPU failure for {self.arch} ({ENV})")
        model = super().build_model()
        if fault in ("model-graph-break", "neuron-extra-graph-break"):  # the model's own code breaks the graph
            model.forward = with_graph_break(model.forward)
        elif fault == "nan-both":
            model.forward = with_nan_logits(model.forward)
        elif fault == "generate-cpu-fail":
            model.generate = _failing_generate(model.generate)
        return model

    def neuron_copy(self):
        fault = fault_for(self.arch)
        model = super().neuron_copy()
        if fault == "segfault-moving":  # the CPU reference exists; the process dies on the way to neuron
            os.kill(os.getpid(), signal.SIGSEGV)
        if fault == "mismatch":  # every later comparison sees a real difference
            import torch
            with torch.no_grad():
                p = next(p for p in model.parameters() if p.is_floating_point() and p.dim() >= 2)
                p.add_(0.05)
        elif fault in ("missing-op", "hang", "crash"):
            model.forward = _failing_forward(model.forward, fault)
        elif fault == "neuron-extra-graph-break":
            model.forward = with_neuron_graph_break(model.forward)
        return model


if __name__ == "__main__":
    worker.run_as_script(FaultyReference)
