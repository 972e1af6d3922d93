"""Training on neuron under torchrun: a tiny transformer with FSDP2, tensor parallel and TP x FSDP; nn.SyncBatchNorm.

One torchrun run of 4 ranks executes this file as its script: every scenario
trains the same tiny transformer for a few steps and rank 0 compares the
losses with a single-process CPU run of the same model and data. The last
scenario saves a sharded checkpoint (torch.distributed.checkpoint) and a full
state dict; the test process loads the shards on CPU, without any process
group, and checks they hold the trained weights. A small network with
nn.SyncBatchNorm (the batch_norm_* kernels TorchNeuron runs on the device and
the CPU lacks) trains on each rank's shard of the batch and must follow
nn.BatchNorm on CPU over the whole batch.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SCENARIOS = ["fsdp", "fsdp_bf16", "tp", "tp_fsdp"]
STEPS = 3
VOCAB, DIM, HEADS, HIDDEN, LAYERS = 64, 32, 4, 64, 2
BATCH, SEQ = 4, 8


@pytest.fixture(scope="module")
def training_run(tmp_path_factory):
    from test_distributed_launch import torchrun
    ckpt = tmp_path_factory.mktemp("ckpt")
    r = torchrun("test_distributed_training.py", 4, str(ckpt), timeout=280)
    return r, ckpt


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_losses_match_single_process_cpu(training_run, scenario):
    r, _ = training_run
    assert r.returncode == 0, f"{r.stdout[-4000:]}\n{r.stderr[-6000:]}"
    assert f"scenario {scenario} ok" in r.stdout, r.stdout


@pytest.mark.slow
def test_sync_batchnorm_matches_cpu_batchnorm(training_run):
    r, _ = training_run
    assert r.returncode == 0, f"{r.stdout[-4000:]}\n{r.stderr[-6000:]}"
    assert "scenario sync_batchnorm ok" in r.stdout, r.stdout


@pytest.mark.slow
def test_sharded_checkpoint_loads_on_cpu(training_run):
    import torch
    import torch.distributed.checkpoint as dcp

    r, ckpt = training_run
    assert r.returncode == 0, f"{r.stdout[-4000:]}\n{r.stderr[-6000:]}"
    full = torch.load(ckpt / "full.pt", map_location="cpu")
    model = tiny_transformer(seed=123)  # different init: every loaded weight must come from the checkpoint
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id=str(ckpt / "sharded"))
    model.load_state_dict(state["model"])
    assert set(full) == set(model.state_dict())
    for name, value in model.state_dict().items():
        assert value.device.type == "cpu"
        assert torch.equal(value, full[name]), name
    reference = tiny_transformer(seed=0)
    reference_losses(reference, steps=STEPS)  # the CPU run the distributed one must have followed
    for name, value in reference.state_dict().items():
        assert torch.allclose(model.state_dict()[name], value, rtol=1e-4, atol=1e-5), name


# ---- the model, data and single-process reference ------------------------------------------------------------

def tiny_transformer(seed: int):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq, self.wk, self.wv, self.wo = (nn.Linear(DIM, DIM, bias=False) for _ in range(4))

        def forward(self, x):
            b, s, _ = x.shape
            # -1 heads: under tensor parallel each rank holds HEADS / tp of them
            q, k, v = (w(x).view(b, s, -1, DIM // HEADS).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(o.transpose(1, 2).reshape(b, s, -1))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1, self.w2 = nn.Linear(DIM, HIDDEN), nn.Linear(HIDDEN, DIM)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention_norm, self.attention = nn.RMSNorm(DIM), Attention()
            self.ffn_norm, self.feed_forward = nn.RMSNorm(DIM), FeedForward()

        def forward(self, x):
            x = x + self.attention(self.attention_norm(x))
            return x + self.feed_forward(self.ffn_norm(x))

    class TinyTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(VOCAB, DIM)
            self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
            self.norm, self.output = nn.RMSNorm(DIM), nn.Linear(DIM, VOCAB, bias=False)

        def forward(self, tokens):
            x = self.tok_embeddings(tokens)
            for layer in self.layers:
                x = layer(x)
            return self.output(self.norm(x))

    torch.manual_seed(seed)
    return TinyTransformer()


def batch(step: int):
    """The same batch every step: the loss must fall as the model memorises it."""
    import torch
    g = torch.Generator().manual_seed(100)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


def loss_of(model, inputs, targets):
    import torch.nn.functional as F
    logits = model(inputs)
    return F.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))


def reference_losses(model, steps: int) -> list[float]:
    import torch
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for step in range(steps):
        inputs, targets = batch(step)
        loss = loss_of(model, inputs, targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def tp_plan():
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel)
    # Megatron-style TP with sequence parallel norms (as in torchtitan's Llama plan)
    top = {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    }
    block = {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(), "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    }
    return top, block


# ---- the worker: run by torchrun ------------------------------------------------------------------------------

def _train(scenario: str, dev, world: int):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor.parallel import parallelize_module

    model = tiny_transformer(seed=0).to(dev)
    dp_size = {"fsdp": world, "fsdp_bf16": world, "tp": 1, "tp_fsdp": 2}[scenario]
    tp_size = world // dp_size
    mesh = init_device_mesh("neuron", (dp_size, tp_size), mesh_dim_names=("dp", "tp"))
    if tp_size > 1:
        top, block = tp_plan()
        parallelize_module(model, mesh["tp"], top)
        for layer in model.layers:
            parallelize_module(layer, mesh["tp"], block)
    if dp_size > 1:
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
            if scenario == "fsdp_bf16" else MixedPrecisionPolicy()
        for layer in model.layers:
            fully_shard(layer, mesh=mesh["dp"], mp_policy=mp)
        fully_shard(model, mesh=mesh["dp"], mp_policy=mp)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    dp_rank, dp_group = mesh["dp"].get_local_rank(), mesh["dp"].get_group()
    rows = BATCH // dp_size
    losses = []
    for step in range(STEPS):
        inputs, targets = batch(step)
        inputs, targets = (t[dp_rank * rows:(dp_rank + 1) * rows].to(dev) for t in (inputs, targets))
        loss = loss_of(model, inputs, targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss, op=dist.ReduceOp.AVG, group=dp_group)  # mean of equal-sized shards
        losses.append(global_loss.item())
    if scenario == "fsdp_bf16":
        p = next(model.parameters())
        assert p.dtype == torch.float32 and p.grad is None, "fp32 sharded parameters outside forward/backward"
    return model, losses


def batchnorm_net(seed: int):
    import torch
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Conv1d(3, 8, 3, padding=1), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(8 * 6, 2))


def _sync_batchnorm(dev, world: int, rank: int) -> tuple[bool, str]:
    """SGD steps of a net with SyncBatchNorm, each rank on its rows, against nn.BatchNorm1d on CPU on all rows."""
    import torch
    import torch.distributed as dist
    g = torch.Generator().manual_seed(7)
    data = [(torch.randn(4 * world, 3, 6, generator=g), torch.randn(4 * world, 2, generator=g)) for _ in range(3)]
    cpu = batchnorm_net(seed=3)
    net = torch.nn.SyncBatchNorm.convert_sync_batchnorm(batchnorm_net(seed=3)).to(dev)
    opt_cpu, opt = torch.optim.SGD(cpu.parameters(), lr=0.1), torch.optim.SGD(net.parameters(), lr=0.1)
    worst = 0.0
    for x, y in data:
        loss_cpu = torch.nn.functional.mse_loss(cpu(x), y)
        loss_cpu.backward()
        rows = slice(rank * 4, rank * 4 + 4)
        loss = torch.nn.functional.mse_loss(net(x[rows].to(dev)), y[rows].to(dev))
        loss.backward()
        for p in net.parameters():  # each rank's loss is the mean over its rows: the mean of theirs is the whole's
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss, op=dist.ReduceOp.AVG)
        worst = max(worst, abs(global_loss.item() - loss_cpu.item()))
        opt_cpu.step(), opt.step(), opt_cpu.zero_grad(), opt.zero_grad()
    bn_cpu, bn = cpu[1], net[1]
    for name in ("weight", "bias", "running_mean", "running_var"):
        worst = max(worst, (getattr(bn, name).detach().cpu() - getattr(bn_cpu, name).detach()).abs().max().item())
    worst = max(worst, (net[4].weight.detach().cpu() - cpu[4].weight.detach()).abs().max().item())
    ok = isinstance(bn, torch.nn.SyncBatchNorm) and bn.num_batches_tracked.item() == len(data) and worst < 1e-4
    return ok, f"max difference from CPU {worst:.2e}"


def _worker(ckpt: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("neuron", torch.neuron.current_device())
    # Bound to the device: DeviceMesh makes its dimension groups with split_group (the collectives test
    # covers the unbound way Transformers initialises, where DeviceMesh uses new_group).
    dist.init_process_group("neuron", device_id=dev)
    expected = reference_losses(tiny_transformer(seed=0), STEPS) if rank == 0 else None
    failed = False
    for scenario in SCENARIOS:
        model, losses = _train(scenario, dev, world)
        if rank == 0:
            tol = 3e-2 if scenario == "fsdp_bf16" else 1e-4  # bf16 parameters in compute
            ok = all(abs(a - b) <= tol * abs(b) for a, b in zip(losses, expected)) and losses[-1] < losses[0]
            print(f"scenario {scenario} {'ok' if ok else 'FAIL'} losses {losses} cpu {expected}", flush=True)
            failed |= not ok
        if scenario == "tp_fsdp":
            dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=os.path.join(ckpt, "sharded"))
            full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
            if rank == 0:
                torch.save(full, os.path.join(ckpt, "full.pt"))
        dist.barrier()
    ok, detail = _sync_batchnorm(dev, world, rank)
    if rank == 0:
        print(f"scenario sync_batchnorm {'ok' if ok else 'FAIL'} {detail}", flush=True)
        failed |= not ok
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    _worker(sys.argv[1])
