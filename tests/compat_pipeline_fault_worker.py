"""The Diffusers compat worker with a real failure injected into chosen pipelines (tests/test_compat_diffusers.py).

    torchneuron compat --suite diffusers --worker compat_pipeline_fault_worker ...   (tests/ on PYTHONPATH)

TORCHNEURON_COMPAT_FAULT="DDIMPipeline:neuron-extra-graph-break" builds DDIMPipeline from its recipe, then makes
its denoiser's forward break the graph once on every device (as a model's own code can) and once more on
neuron only: the compiled step fails with a graph break on neuron and on CPU, but not the same failure. The
production worker has no hook for this: the fault lives in the PipelineBuild subclass this module gives it.
"""

from __future__ import annotations

import functools

import compat_fault_worker
from torch_neuronx.compat.pipelines import worker

FAULTS = ("neuron-extra-graph-break",)


def fault_for(name: str) -> str | None:
    return compat_fault_worker.fault_for(name, FAULTS)


def _breaking_forward(module):
    """The module's forward, then a graph break; where the module's weights are on neuron, first an op on the input
    and another break (the backend counts a break where it ends a graph: a break needs an op before it)."""
    import torch
    forward = module.forward
    on_neuron = next(module.parameters()).device.type == "neuron"

    @functools.wraps(forward)
    def forward_with_breaks(sample, *args, **kwargs):
        if on_neuron:
            sample = sample + 0
            torch._dynamo.graph_break()
        out = forward(sample, *args, **kwargs)
        torch._dynamo.graph_break()
        return out

    return forward_with_breaks


class FaultyPipelineBuild(worker.PipelineBuild):
    def to_device(self, pipe, device: str):
        pipe = super().to_device(pipe, device)
        if fault_for(self.name) == "neuron-extra-graph-break":
            for module in worker.denoisers(pipe).values():
                module.forward = _breaking_forward(module)
        return pipe


if __name__ == "__main__":
    worker.run_as_script(FaultyPipelineBuild)
