"""2-D parallel training on neuron: tensor parallel (with sequence parallel) inside FSDP2, under torchrun.

    TORCHNEURON_INSTANCE=trn2.48xlarge torchrun --nproc-per-node 8 examples/train_tp_fsdp.py  # 2 x 4 mesh: FSDP 2, TP 4
    TP_SIZE=4 FSDP_SIZE=8 torchrun --nproc-per-node 32 examples/train_tp_fsdp.py   # 4 x 8: half a trn2.48xlarge
    # two hosts of 16 ranks each (on one machine, each torchrun node is one emulated host):
    torchrun --nnodes 2 --node-rank {0,1} --nproc-per-node 16 --master-addr HOST0 --master-port 29500 \
        examples/train_tp_fsdp.py

Each rank holds one NeuronCore, as in TorchNeuron: NeuronCore LOCAL_RANK of the
emulated instance (default trn2.48xlarge), as device neuron:LOCAL_RANK. The device mesh is (dp, tp) = (FSDP_SIZE, TP_SIZE):
a TP group is TP_SIZE consecutive ranks, so with TP_SIZE dividing the cores of
a host, tensor-parallel traffic (the most frequent and latency-bound) stays on
one host and FSDP's all-gathers / reduce-scatters cross hosts.

Environment: TP_SIZE (default 4, at most the world size), FSDP_SIZE (default
world // TP_SIZE), STEPS (10), DIM (256), LAYERS (4), SEQ (64), BATCH per
FSDP rank (4), CKPT_DIR (save a sharded checkpoint there at the end).
"""

from __future__ import annotations

import os
import time
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                               SequenceParallel, parallelize_module)

VOCAB = 1024


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.head_dim = dim // heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x):
        b, s, _ = x.shape
        # -1: under tensor parallel a rank holds heads / TP_SIZE of the heads
        q, k, v = (w(x).view(b, s, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.w1, self.w2, self.w3 = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(4 * dim, dim, bias=False), \
            nn.Linear(dim, 4 * dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.attention_norm, self.attention = nn.RMSNorm(dim), Attention(dim, heads)
        self.ffn_norm, self.feed_forward = nn.RMSNorm(dim), FeedForward(dim)

    def forward(self, x):
        x = x + self.attention(self.attention_norm(x))
        return x + self.feed_forward(self.ffn_norm(x))


class Transformer(nn.Module):
    def __init__(self, dim: int, layers: int, heads: int):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, dim)
        self.layers = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm, self.output = nn.RMSNorm(dim), nn.Linear(dim, VOCAB, bias=False)

    def forward(self, tokens):
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.output(self.norm(x))


def apply_tensor_parallel(model: Transformer, tp_mesh) -> None:
    """Megatron-style TP: column-parallel in, row-parallel out; norms and residuals sharded along the sequence."""
    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    })
    for block in model.layers:
        parallelize_module(block, tp_mesh, {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w3": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
        })


def apply_fsdp(model: Transformer, dp_mesh) -> None:
    """FSDP2 per block, bf16 compute with fp32 gradient reduction (Trainium's native mixed precision)."""
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.layers:
        fully_shard(block, mesh=dp_mesh, mp_policy=mp)
    fully_shard(model, mesh=dp_mesh, mp_policy=mp)


def main() -> None:
    # The logits leave the root FSDP module as a view (TP's to_local); FSDP2 warns about in-place edits
    # of such views, and this loop makes none.
    warnings.filterwarnings("ignore", message="FSDP2-wrapped module .* returned a view tensor")
    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron", torch.neuron.current_device())  # neuron:LOCAL_RANK
    tp = min(env_int("TP_SIZE", 4), world)
    dp = env_int("FSDP_SIZE", world // tp)
    if dp * tp != world:
        raise SystemExit(f"FSDP_SIZE x TP_SIZE = {dp} x {tp} must equal the {world} ranks")
    dim, layers, heads = env_int("DIM", 256), env_int("LAYERS", 4), 8
    if heads % tp:
        raise SystemExit(f"TP_SIZE={tp} must divide the {heads} attention heads")
    seq, batch, steps = env_int("SEQ", 64), env_int("BATCH", 4), env_int("STEPS", 10)
    if seq % tp:
        raise SystemExit(f"TP_SIZE={tp} must divide SEQ={seq} (sequence parallel shards the sequence)")

    mesh = init_device_mesh("neuron", (dp, tp), mesh_dim_names=("dp", "tp"))
    if dp > 1 and tp > 1:
        # A group over both dimensions lets DTensor reduce the global gradient norm in one
        # all_reduce instead of one per dimension (clip_grad_norm_ below).
        mesh["dp", "tp"]._flatten("dp_tp")
    torch.manual_seed(0)  # the same initial weights on every rank before sharding
    model = Transformer(dim, layers, heads).to(device)
    if tp > 1:
        apply_tensor_parallel(model, mesh["tp"])
    apply_fsdp(model, mesh["dp"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    if rank == 0:
        params = sum(p.numel() for p in Transformer(dim, layers, heads).parameters())
        print(f"{world} ranks on {torch.neuron.get_device_properties(device).instance_type}: mesh dp={dp} x tp={tp}; "
              f"{params / 1e6:.1f}M parameters", flush=True)

    # Ranks of one TP group see the same batch; FSDP ranks see different ones. The sequences count
    # up from a random start, so there is something to learn and the loss falls within a few steps.
    data = torch.Generator().manual_seed(1000 + mesh["dp"].get_local_rank())
    start = time.perf_counter()
    for step in range(steps):
        starts = torch.randint(0, VOCAB, (batch, 1), generator=data)
        tokens = ((starts + torch.arange(seq + 1)) % VOCAB).to(device)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        mean = loss.detach()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG, group=mesh["dp"].get_group())
        if rank == 0:
            print(f"step {step} loss {mean.item():.4f}", flush=True)
    elapsed = time.perf_counter() - start
    if rank == 0:
        print(f"{steps * batch * dp * seq / elapsed:.0f} tokens/s", flush=True)

    if os.environ.get("CKPT_DIR"):
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_model_state_dict
        dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=os.environ["CKPT_DIR"])
        if rank == 0:
            print(f"sharded checkpoint in {os.environ['CKPT_DIR']}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
