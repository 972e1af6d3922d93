"""`torchneuron plan`: will a training job fit each NeuronCore of a Trainium instance (or of many), with which
TP x FSDP layout, and how fast Trainium would run it. Answered at full model size in one process: the real training step (the Transformers model,
sharded by DistributedConfig / FSDP2, loss, backward, optimizer step) is traced with fake tensors while PyTorch's
fake process group simulates the whole world (docs/plan.md).

    from torch_neuronx.plan import plan, sweep
    p = plan("llama-3.1-70b", instance="trn2.48xlarge", tp=8, fsdp=8, seq=4096, activation_checkpointing=True)
    p.fits, p.margin_bytes, p.by_category, p.estimate.tokens_per_second, p.to_json()

Files: config.py (model configs, presets/), hardware.py (instances, documented rates, the collective rule), step.py
(the step, shared with the real run in measure.py and bench/plan_accuracy.py), world.py (fake process group),
trace.py (memory), cost.py (the op stream), fusion.py + flash_attention.py + interconnect.py + estimate.py (step
time), published.py (AWS's figures, the error band), planner.py (plan, sweep), cli.py.
"""

from .config import PlanError, presets
from .planner import Plan, Sweep, layouts, plan, sweep

__all__ = ["Plan", "PlanError", "Sweep", "layouts", "plan", "presets", "sweep"]
