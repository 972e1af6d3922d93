"""Run the planned step for real on this rank's emulated NeuronCore and measure its peak HBM.

The reference a plan must agree with: step.py's model, sharding, optimizer and step, on real device memory, the
peak read from the runtime's exact accounting (torch.neuron.max_memory_allocated). Under torchrun each rank
calls measure_step after its process group exists; a single process (world 1) needs none.
"""

from __future__ import annotations

import torch

from . import step as step_mod


def measure_step(config, spec: step_mod.StepSpec, device: torch.device) -> dict:
    """Build, take a first step (it creates the optimizer state), then measure a second, steady-state step."""
    torch.manual_seed(0)
    model = step_mod.build_model(config, spec, device, step_mod.make_mesh(spec))
    optimizer = step_mod.make_optimizer(model, spec)
    batch = step_mod.make_batch(config, spec, device)
    first_loss = step_mod.train_step(model, optimizer, batch).float().item()
    torch.neuron.synchronize(device)
    torch.neuron.reset_peak_memory_stats(device)
    before = torch.neuron.memory_allocated(device)
    loss = step_mod.train_step(model, optimizer, batch).float().item()
    torch.neuron.synchronize(device)
    return {"peak_bytes": torch.neuron.max_memory_allocated(device), "before_step_bytes": before,
            "losses": [first_loss, loss]}
