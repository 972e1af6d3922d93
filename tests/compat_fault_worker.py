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
  cpu-fail    building the model raises, as an architecture that fails on CPU too
  model-graph-break  the model's forward (on CPU and on neuron alike) ends in a graph break, as the
              code of some models does: every compiled step fails on neuron and on CPU
"""

from __future__ import annotations

import functools
import os
import time

from torch_neuronx.compat import worker

ENV = "TORCHNEURON_COMPAT_FAULT"
FAULTS = ("missing-op", "mismatch", "hang", "crash", "cpu-fail", "model-graph-break")


def fault_for(arch: str) -> str | None:
    """The fault injected into `arch`, if any."""
    for item in os.environ.get(ENV, "").split(","):
        name, _, fault = item.strip().partition(":")
        if name == arch and fault:
            if fault not in FAULTS:
                raise ValueError(f"{ENV}: unknown fault {fault!r} (choose from {', '.join(FAULTS)})")
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


class FaultyReference(worker.CpuReference):
    def build_model(self):
        fault = fault_for(self.arch)
        if fault == "cpu-fail":
            raise RuntimeError(f"injected CPU failure for {self.arch} ({ENV})")
        model = super().build_model()
        if fault == "model-graph-break":  # the model's own code (CPU and neuron copies alike) breaks the graph
            import torch
            forward = model.forward

            @functools.wraps(forward)  # generate() reads the forward's signature
            def forward_with_break(*args, **kwargs):
                out = forward(*args, **kwargs)
                torch._dynamo.graph_break()
                return out

            model.forward = forward_with_break
        return model

    def neuron_copy(self):
        model = super().neuron_copy()
        fault = fault_for(self.arch)
        if fault == "mismatch":  # every later comparison sees a real difference
            import torch
            with torch.no_grad():
                p = next(p for p in model.parameters() if p.is_floating_point() and p.dim() >= 2)
                p.add_(0.05)
        elif fault in ("missing-op", "hang", "crash"):
            model.forward = _failing_forward(model.forward, fault)
        return model


if __name__ == "__main__":
    worker.run_as_script(FaultyReference)
