"""`torchneuron plan`: will a training job fit each NeuronCore of a Trainium instance, with which TP x FSDP layout,
and roughly how fast. Answered at full model size in one process: the real training step (the Transformers model,
sharded by DistributedConfig / FSDP2, loss, backward, optimizer step) is traced with fake tensors while PyTorch's
fake process group simulates the whole world (docs/plan.md).

    from torch_neuronx.plan import plan, sweep
    p = plan("llama-3.1-70b", instance="trn2.48xlarge", tp=8, fsdp=8, seq=4096, activation_checkpointing=True)
    p.fits, p.margin_bytes, p.by_category, p.estimate.tokens_per_second, p.to_json()

Files: config.py (model configs, presets/), hardware.py (instances, peaks, group sizes), step.py (the step,
shared with the real run in measure.py and bench/plan_accuracy.py), world.py (fake process group), trace.py
(memory), cost.py (FLOPs, bytes, collectives), estimate.py (step time), planner.py (plan, sweep), cli.py.
"""

from .config import PlanError, presets
from .planner import Plan, Sweep, layouts, plan, sweep

__all__ = ["Plan", "PlanError", "Sweep", "layouts", "plan", "presets", "sweep"]
