"""torch.optim's foreach default cannot update a parameter group that mixes DTensor and plain tensors (torch 2.13).

The failure. A tensor-parallel-only model from Transformers,
`from_pretrained(..., distributed_config=DistributedConfig(tp_size=4, fsdp_size=1))`, holds the weights its
TP plan shards as DTensors and every other parameter (the RMSNorm weights, for one) as a plain tensor, the
same on every rank. `torch.optim.AdamW(model.parameters())` then fails at the first step with
"aten._foreach_mul_.Scalar got mixed torch.Tensor and DTensor":

* with `foreach=None` (the default), `_default_to_fused_or_foreach` (torch/optim/optimizer.py) picks the
  multi-tensor path when every parameter is a Tensor, Parameter or DTensor (torch.distributed.tensor adds
  DTensor to `_foreach_supported_types`) on a foreach device: cuda, xpu, mtia and the PrivateUse1 device,
  i.e. neuron. CPU is not one, so on CPU the same script takes the per-tensor loop and trains;
* the multi-tensor path groups the tensors by (device, dtype) only (`_group_tensors_by_device_and_dtype`),
  so one `torch._foreach_*` call gets DTensors and plain tensors together, and DTensor refuses mixed lists.

CUDA fails exactly the same way: this is not a neuron bug. Transformers' Trainer avoids it by giving the
parameters of each device mesh their own param group (`has_mixed_dtensor`, trainer.py); a hand-written
loop over `model.parameters()` does not. FSDP2 (fsdp_size > 1) makes every parameter a DTensor, so only
TP-only layouts are affected.

The shim (installed at plugin load, through torch.optim's public global step pre-hook): before a step, a
param group that leaves `foreach` to the default (None), has parameters on neuron, and mixes DTensor and
plain tensors, is set to `foreach=False`: the per-tensor loop, as on CPU, which DTensor runs per tensor.
The group keeps that setting (it shows in the optimizer's state_dict). A group that asks for
`foreach=True` with mixed parameters gets an error naming the cause and the two workarounds instead of
DTensor's. Every other group, and every other device, is untouched.

Upstream fix that removes it: torch.optim groups foreach tensor lists by tensor type as well as by
(device, dtype) (or `_default_to_fused_or_foreach` declines foreach for a list that mixes tensor
subclasses); or Transformers' TP keeps unsharded parameters as replicated DTensors.
"""

from __future__ import annotations

import sys
import warnings

import torch

WRITTEN_FOR = "2.13."
_warned = False


def is_mixed(params) -> bool:
    """Do these parameters mix DTensors and plain tensors (the lists DTensor's foreach kernels refuse)?"""
    dtensor_module = sys.modules.get("torch.distributed.tensor")
    if dtensor_module is None:
        return False  # DTensor was never imported: no parameter can be one
    dtensor = dtensor_module.DTensor
    kinds = {isinstance(p, dtensor) for p in params if p is not None}
    return len(kinds) > 1


def _on_neuron(params) -> bool:
    return any(p is not None and p.device.type == "neuron" for p in params)


def _step_pre_hook(optimizer, args, kwargs) -> None:
    global _warned
    for group in optimizer.param_groups:
        if group.get("foreach", False) is False or group.get("fused"):
            continue  # no foreach setting, per-tensor already, or fused
        params = group["params"]
        if not _on_neuron(params) or not is_mixed(params):
            continue
        if group["foreach"]:
            raise RuntimeError(
                f"{type(optimizer).__name__}(foreach=True) cannot update a param group that mixes DTensor and plain "
                "tensor parameters (a tensor-parallel model from Transformers keeps the parameters its TP plan does "
                "not shard as plain tensors); torch's foreach kernels take one kind per call. Pass foreach=False, "
                "or give the DTensor parameters their own param group (as Transformers' Trainer does).")
        group["foreach"] = False
        if not _warned:
            _warned = True
            warnings.warn(
                f"torch_neuronx: {type(optimizer).__name__} updates a param group that mixes DTensor and plain "
                "tensors (tensor parallel without FSDP) one tensor at a time (foreach=False), as on CPU: torch's "
                "foreach kernels take one kind per call. For the multi-tensor path, give the DTensor parameters "
                "their own param group. (torch_neuronx/integrations/optim_foreach.py)", stacklevel=3)


def install() -> None:
    if not torch.__version__.startswith(WRITTEN_FOR):
        warnings.warn(f"torch_neuronx: the optimizer foreach shim was written for torch {WRITTEN_FOR}x, not "
                      f"{torch.__version__}: not installed (torch_neuronx/integrations/optim_foreach.py)")
        return
    from torch.optim.optimizer import register_optimizer_step_pre_hook
    register_optimizer_step_pre_hook(_step_pre_hook)
