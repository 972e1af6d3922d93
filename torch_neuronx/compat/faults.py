"""Test hook: make one architecture fail for real inside its worker process.

TORCHNEURON_COMPAT_FAULT="llama:hang,gpt2:missing-op" makes the llama worker
hang in its first neuron step (so the runner's timeout must fire) and the gpt2
worker hit a missing-op error. The tool's own tests use it to prove that a
failing, hanging or crashing architecture is reported with the right category
without mocking anything: the worker, the subprocess, the timeout and the
report all run as in a real matrix.

Faults:
  missing-op  the first neuron step raises the dispatcher's missing-kernel error
  mismatch    a neuron weight is nudged, so logits, grads and tokens really differ
  hang        the first neuron step sleeps past any timeout
  crash       the first neuron step aborts the process (SIGABRT)
  cpu-fail    building the model raises, as an architecture that fails on CPU too
  model-graph-break  the model's forward (on CPU and on neuron alike) ends in a graph break, as the
              code of some models does: every compiled step fails on neuron and on CPU
"""

from __future__ import annotations

import os
import time

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


def on_build(arch: str) -> None:
    if fault_for(arch) == "cpu-fail":
        raise RuntimeError(f"injected CPU failure for {arch} ({ENV})")


def on_model(arch: str, model) -> None:
    """model-graph-break: the model's own code (CPU and neuron copies alike) breaks Dynamo's graph."""
    if fault_for(arch) != "model-graph-break":
        return
    import functools
    import torch
    forward = model.forward

    @functools.wraps(forward)  # generate() reads the forward's signature
    def forward_with_break(*args, **kwargs):
        out = forward(*args, **kwargs)
        torch._dynamo.graph_break()
        return out

    model.forward = forward_with_break


def on_neuron_model(arch: str, model) -> None:
    """Nudge one weight of the neuron copy (mismatch): every later comparison sees a real difference."""
    if fault_for(arch) == "mismatch":
        import torch
        with torch.no_grad():
            p = next(p for p in model.parameters() if p.is_floating_point() and p.dim() >= 2)
            p.add_(0.05)


def on_neuron_step(arch: str) -> None:
    fault = fault_for(arch)
    if fault == "missing-op":
        # the exact text PyTorch's dispatcher raises for an op without a kernel
        raise NotImplementedError(
            "Could not run 'aten::_injected_op' with arguments from the 'neuron' backend. "
            f"(injected by {ENV})")
    if fault == "hang":
        while True:
            time.sleep(3600)
    if fault == "crash":
        os.abort()
