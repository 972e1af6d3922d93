"""Accelerate on neuron (examples/hf_accelerate.py): Accelerator() picks neuron; prepare(); gradient
accumulation; losses equal plain PyTorch on CPU; save_model() reloads on CPU."""

import os
import sys

import pytest
import torch

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))
import hf_accelerate  # noqa: E402

# module.to("neuron") must keep Parameter objects (as with CUDA) for an optimizer made before prepare() to work
MOVE_KEEPS_PARAMS = torch._has_compatible_shallow_copy_type(torch.ones(1), torch.ones(1, device="neuron"))


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    """Accelerate's state is a per-process singleton; other tests (Trainer) configure it differently."""
    from accelerate.state import AcceleratorState
    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def test_accelerator_picks_neuron():
    from accelerate import Accelerator
    from accelerate.utils import DistributedType, is_neuron_available
    from accelerate.utils.imports import get_torch_accelerator_backend

    assert is_neuron_available()
    assert get_torch_accelerator_backend()[0] == "neuron"
    acc = Accelerator()
    assert acc.device.type == "neuron"
    assert acc.distributed_type == DistributedType.NO and acc.num_processes == 1
    x = acc.prepare(torch.utils.data.DataLoader(torch.arange(8.0), batch_size=4, pin_memory=True))
    assert [b.device.type for b in x] == ["neuron", "neuron"]


def test_training_loop_grad_accum_matches_cpu_and_save_model_reloads():
    # Accelerate's canonical order: optimizer from the CPU model, then prepare() moves both
    r = hf_accelerate.main(["--steps", "4"] + ([] if MOVE_KEEPS_PARAMS else ["--place-model-first"]))
    assert r["device"].startswith("neuron")
    assert r["max_rel_diff"] <= 1e-5
    assert r["reload_diff"] <= 1e-4


def test_prepare_moves_model_and_optimizer_made_before_still_steps_it():
    from accelerate import Accelerator

    acc = Accelerator()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model, opt = acc.prepare(model, opt)
    before = model.weight.detach().cpu().clone()
    acc.backward(model(torch.ones(2, 4, device=acc.device)).sum())
    opt.step()
    assert model.weight.device.type == "neuron"
    assert not torch.equal(model.weight.detach().cpu(), before), "optimizer did not update the neuron weights"
