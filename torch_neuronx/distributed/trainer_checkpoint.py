"""Checkpoint and resume a Hugging Face Trainer whose model was sharded at load (`from_pretrained(distributed_config=...)`).

Transformers 5.23 cannot resume such a run, on any device (docs/fault-tolerance.md shows each on CPU/gloo too):
  * the Trainer refuses to save the optimizer state of a model sharded at load ("Pass `save_only_model=True` or
    `save_strategy='no'`"), so a run that dies restarts its optimizer, LR schedule and RNG from scratch;
  * `trainer.train(resume_from_checkpoint=...)` loads the checkpoint's full-tensor safetensors with
    `model.load_state_dict`, which fails on DTensor parameters ("aten.copy_.default got mixed torch.Tensor and
    DTensor");
  * `resume_from_checkpoint=True` takes the highest-numbered `checkpoint-N`, even one a kill left half-written.

`DistributedCheckpointCallback` closes these gaps with the Trainer's own extension points; pass it to the Trainer
(or TRL's SFTTrainer) together with `save_only_model=True`:

    trainer = SFTTrainer(..., args=SFTConfig(..., save_strategy="steps", save_steps=K, save_only_model=True),
                         callbacks=[DistributedCheckpointCallback()])
    trainer.train(resume_from_checkpoint=True)      # after a restart; None on a fresh start

  * on every save, every rank writes the sharded model, optimizer and LR-scheduler state with DCP to
    `checkpoint-N/distributed_state/`, committed atomically (torch_neuronx.distributed.checkpoint), and its RNG
    state to `checkpoint-N/rng_state_<rank>.pth` (the file the Trainer restores itself). A `checkpoint-N` is
    complete exactly when its `distributed_state` verifies;
  * when the Trainer is created, incomplete `checkpoint-N` directories are renamed `checkpoint-N.incomplete`, so
    `resume_from_checkpoint=True` picks the newest complete one;
  * the Trainer's own weight loading works on the sharded model (a `load_state_dict` pre-hook distributes each full
    tensor to its parameter's mesh and placements), and when training starts from checkpoint N the sharded model,
    optimizer, scheduler and device RNG state are loaded from it.

Resume from a checkpoint in `output_dir` (where the callback finds it), on the same mesh, with
`save_total_limit` None or >= 2 (the Trainer deletes old checkpoints before this callback completes the new one).

The upstream fix that would retire this file: the Trainer saving `get_state_dict(model, optimizer)` with DCP in
`_save_checkpoint` and loading it with `set_state_dict` in `_load_from_checkpoint` /
`_load_optimizer_and_scheduler` when `is_distributed_loading_by_transformers` (Transformers already has
`transformers.distributed.save_optimizer_distributed` / `load_optimizer_distributed` for the optimizer part), and
`get_last_checkpoint` skipping directories a save did not finish. Written against Transformers 5.23.
"""

from __future__ import annotations

import os
import random
import shutil
import warnings

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful
from torch.distributed.tensor import DTensor, distribute_tensor
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint

from . import checkpoint

STATE_DIR = "distributed_state"  # must not contain "optimizer": the Trainer would take it for an FSDP checkpoint


class DistributedCheckpointCallback(TrainerCallback):
    """Makes a Trainer run of a model sharded at load (DistributedConfig) resumable; see the module docstring."""

    def on_init_end(self, args, state, control, model=None, **kwargs):
        if not getattr(model, "is_distributed_loading_by_transformers", False):
            raise ValueError("DistributedCheckpointCallback is for models sharded by from_pretrained(distributed_config"
                             "=...); the Trainer checkpoints and resumes any other model itself: drop the callback")
        if args.save_total_limit is not None and args.save_total_limit < 2:
            raise ValueError(f"save_total_limit={args.save_total_limit}: the Trainer deletes the previous checkpoint "
                             "before the new one is complete, so a kill while saving would leave none. Use "
                             "save_total_limit=None or >= 2")
        model.register_load_state_dict_pre_hook(_distribute_full_tensors)
        if _rank() == 0 and os.path.isdir(args.output_dir):
            _set_aside_incomplete(args.output_dir)
        _barrier()

    def on_save(self, args, state, control, model=None, optimizer=None, lr_scheduler=None, **kwargs):
        path = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        os.makedirs(path, exist_ok=True)
        torch.save(_rng_state(), os.path.join(path, f"rng_state_{_rank()}.pth"))
        # checkpoint.write starts with a barrier, so every rank's RNG file exists before the commit
        checkpoint.write({"trainer": _TrainState(model, optimizer, lr_scheduler)}, os.path.join(path, STATE_DIR),
                         manifest={"global_step": state.global_step})

    def on_train_begin(self, args, state, control, model=None, optimizer=None, lr_scheduler=None, **kwargs):
        if state.global_step == 0:
            return  # a fresh start
        path = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        problem = checkpoint.verify(os.path.join(path, STATE_DIR))
        if problem is not None:
            raise RuntimeError(
                f"resuming at step {state.global_step}, but {path}/{STATE_DIR} cannot be loaded ({problem}). "
                f"DistributedCheckpointCallback resumes from checkpoints it completed in output_dir "
                f"({args.output_dir}): pass resume_from_checkpoint=True, which picks the newest complete one")
        dcp.load({"trainer": _TrainState(model, optimizer, lr_scheduler)}, checkpoint_id=os.path.join(path, STATE_DIR))
        device_rng = torch.load(os.path.join(path, f"rng_state_{_rank()}.pth"), weights_only=False).get("device")
        if device_rng is not None:
            _device_module().set_rng_state(device_rng)


class _TrainState(Stateful):
    """Sharded model and optimizer (parameter-name keys) and the LR scheduler, as one DCP entry."""

    OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)

    def __init__(self, model, optimizer, lr_scheduler):
        # the Trainer hands over Accelerate's AcceleratedOptimizer; DCP's state-dict helpers need the torch optimizer
        self.model, self.optimizer, self.lr_scheduler = model, getattr(optimizer, "optimizer", optimizer), lr_scheduler

    def state_dict(self):
        model, optimizer = get_state_dict(self.model, self.optimizer, options=self.OPTIONS)
        return {"model": model, "optimizer": optimizer, "lr_scheduler": self.lr_scheduler.state_dict()}

    def load_state_dict(self, state):
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optimizer"], options=self.OPTIONS)
        self.lr_scheduler.load_state_dict(state["lr_scheduler"])


def _distribute_full_tensors(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                             error_msgs):
    """load_state_dict pre-hook: a full tensor for a DTensor parameter or buffer becomes a DTensor with the same
    mesh and placements (every rank holds the full tensor, so each keeps its own shard: no communication)."""
    targets = dict(module.named_parameters(prefix=prefix.rstrip(".")))
    targets.update(module.named_buffers(prefix=prefix.rstrip(".")))
    for key, value in state_dict.items():
        target = targets.get(key)
        if isinstance(target, DTensor) and isinstance(value, torch.Tensor) and not isinstance(value, DTensor):
            state_dict[key] = distribute_tensor(value.to(device=target.device, dtype=target.dtype),
                                                target.device_mesh, target.placements, src_data_rank=None)


def _set_aside_incomplete(output_dir: str) -> None:
    """Rename the checkpoint-N directories without a verified distributed state, newest first, until a complete one."""
    while (last := get_last_checkpoint(output_dir)) is not None:
        problem = checkpoint.verify(os.path.join(last, STATE_DIR))
        if problem is None:
            return
        aside = last + ".incomplete"
        shutil.rmtree(aside, ignore_errors=True)
        os.rename(last, aside)
        warnings.warn(f"{last} is incomplete ({STATE_DIR}: {problem}; a save was interrupted): renamed to {aside}, "
                      f"so resume_from_checkpoint=True takes the checkpoint before it", stacklevel=3)


def _rng_state() -> dict:
    """The Trainer's RNG file format (python, numpy, cpu), plus this rank's accelerator generator."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.random.get_rng_state()}
    module = _device_module()
    if module is not None:
        state["device"] = module.get_rng_state()
    return state


def _device_module():
    accelerator = torch.accelerator.current_accelerator()
    return torch.get_device_module(accelerator) if accelerator is not None else None


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()
