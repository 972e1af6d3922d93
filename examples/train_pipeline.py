"""Pipeline-parallel training on neuron: a Transformers Llama cut into stages, trained with
torch.distributed.pipelining under torchrun, alone and combined with FSDP2 or tensor parallel on a 2-D/3-D DeviceMesh;
every step's loss equals one CPU process's training of the whole model on the whole batch.

    torchrun --nproc-per-node 2 examples/train_pipeline.py                       # PP 2: GPipe, 1F1B, interleaved
    torchrun --nproc-per-node 4 examples/train_pipeline.py --mesh 2,2,1 2,1,2    # PP 2 x FSDP 2, then PP 2 x TP 2
    torchrun --nproc-per-node 8 examples/train_pipeline.py --mesh 2,2,2 --schedules 1f1b   # PP x FSDP x TP (3-D)

Each --mesh is (pp, dp, tp), their product the world size (default: pp = world); each rank holds one NeuronCore (neuron:LOCAL_RANK) and the layers of its stage(s): with a
single-stage schedule (GPipe, 1F1B) stage s of PP stages runs on pipeline rank s; the interleaved 1F1B schedule gives
each pipeline rank two stages (s and s + PP, "virtual stages"), so the model is cut in 2 x PP. Stages pass
activations forward and gradients backward with send/recv (batch_isend_irecv) through the c10d "neuron" backend. A
batch is split into microbatches; the schedules accumulate the microbatches' gradients, scaled by 1 / microbatches,
so a step equals one step on the whole batch. With --dp the batch is split over the FSDP ranks (each pipeline holds
1/dp of every stage's weights); with --tp each stage is tensor-parallel (Megatron's Llama plan).

Against CUDA the script differs only in the backend name ("neuron" instead of "nccl") and the device string.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

SCHEDULES = ("gpipe", "1f1b", "interleaved")
VOCAB, SEQ, BATCH = 256, 16, 8


def llama(layers: int, seed: int = 0):
    """A tiny Transformers Llama (random weights, fp32, SDPA attention)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ,
                         attn_implementation="sdpa", tie_word_embeddings=False)
    return LlamaForCausalLM(config)


class LlamaStage(nn.Module):
    """Layers [first, last) of a LlamaForCausalLM, with its embedding (first stage) or its norm and head (last stage).

    The pieces are the model's own modules, so their parameters keep their names ("model.layers.3.mlp.up_proj...")
    and the stages' state dicts together are the model's. Activations between stages are the residual stream
    [batch, seq, hidden]; each stage recomputes the rotary table (no mask: causal SDPA, as the whole model runs it).
    """

    def __init__(self, model, first: int, last: int):
        super().__init__()
        n = model.config.num_hidden_layers
        inner = model.model
        self.embed_tokens = inner.embed_tokens if first == 0 else None
        self.layers = nn.ModuleDict({str(i): inner.layers[i] for i in range(first, last)})
        self.rotary_emb = inner.rotary_emb
        self.norm = inner.norm if last == n else None
        self.lm_head = model.lm_head if last == n else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed_tokens(x) if self.embed_tokens is not None else x
        positions = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
        rotary = self.rotary_emb(h, positions)
        for layer in self.layers.values():
            h = layer(h, position_embeddings=rotary, position_ids=positions)
        return self.lm_head(self.norm(h)) if self.lm_head is not None else h


def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences counting up from random starts: learnable, so the loss falls."""
    g = torch.Generator().manual_seed(1000 + step)
    tokens = (torch.randint(0, VOCAB, (BATCH, 1), generator=g) + torch.arange(SEQ + 1)) % VOCAB
    return tokens[:, :-1], tokens[:, 1:]


def cpu_losses(layers: int, steps: int, lr: float) -> list[float]:
    """The reference: the whole model on the whole batch, one process, CPU."""
    model = llama(layers)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        inputs, targets = batch(step)
        loss = loss_fn(model(inputs).logits, targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def tensor_parallel(stage: LlamaStage, tp_mesh) -> None:
    """Megatron's Llama plan: q/k/v and gate/up column-parallel, o and down row-parallel (heads split over TP)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    for layer in stage.layers.values():
        parallelize_module(layer, tp_mesh, {
            "self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(), "mlp.down_proj": RowwiseParallel(),
        })


def train(schedule_name: str, args, mesh, device: torch.device) -> list[float] | None:
    """Train with one schedule; the losses on the ranks that hold the last stage (else None)."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

    pp_rank, pp = mesh["pp"].get_local_rank(), mesh["pp"].size()
    per_rank = 2 if schedule_name == "interleaved" else 1
    n_stages = pp * per_rank
    layers = n_stages * args.layers_per_stage
    model = llama(layers)  # the same initial weights on every rank; each keeps its stages' modules
    stage_ids = [pp_rank + v * pp for v in range(per_rank)]
    stages, params = [], []
    for s in stage_ids:
        module = LlamaStage(model, s * args.layers_per_stage, (s + 1) * args.layers_per_stage).to(device)
        if mesh["tp"].size() > 1:
            tensor_parallel(module, mesh["tp"])
        if mesh["dp"].size() > 1:
            for layer in module.layers.values():
                fully_shard(layer, mesh=mesh["dp"])
            fully_shard(module, mesh=mesh["dp"])
        params += list(module.parameters())
        stages.append(PipelineStage(module, s, n_stages, device, group=mesh["pp"].get_group()))
    del model
    if schedule_name == "interleaved":
        schedule = ScheduleInterleaved1F1B(stages, n_microbatches=args.microbatches, loss_fn=loss_fn)
    else:
        cls = ScheduleGPipe if schedule_name == "gpipe" else Schedule1F1B
        schedule = cls(stages[0], n_microbatches=args.microbatches, loss_fn=loss_fn)
    opt = torch.optim.SGD(params, lr=args.lr)
    holds_last = n_stages - 1 in stage_ids
    dp_rank, dp = mesh["dp"].get_local_rank(), mesh["dp"].size()
    rows = BATCH // dp
    losses = []
    for step in range(args.steps):
        inputs, targets = (t[dp_rank * rows:(dp_rank + 1) * rows].to(device) for t in batch(step))
        microbatch_losses: list[torch.Tensor] = []
        if pp_rank == 0:
            schedule.step(inputs, target=targets, losses=microbatch_losses)
        else:
            schedule.step(target=targets, losses=microbatch_losses)
        opt.step()
        opt.zero_grad()
        if holds_last:
            loss = torch.stack([x.detach() for x in microbatch_losses]).mean()
            if dp > 1:
                dist.all_reduce(loss, op=dist.ReduceOp.AVG, group=mesh["dp"].get_group())
            losses.append(loss.item())
    return losses if holds_last else None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--schedules", nargs="+", choices=SCHEDULES, default=list(SCHEDULES))
    p.add_argument("--mesh", nargs="+", default=None,
                   help="pp,dp,tp layouts, each multiplying to the world size (default: pp = world, dp = tp = 1)")
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--layers-per-stage", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--rtol", type=float, default=1e-4)
    args = p.parse_args(argv)

    from torch.distributed.device_mesh import init_device_mesh
    dist.init_process_group("neuron")
    world = dist.get_world_size()
    device = torch.device("neuron", torch.neuron.current_device())  # neuron:LOCAL_RANK
    layouts = [tuple(int(x) for x in m.split(",")) for m in args.mesh or [f"{world},1,1"]]
    failed = False
    for pp, dp, tp in layouts:
        if pp * dp * tp != world or pp < 2:
            raise SystemExit(f"--mesh {pp},{dp},{tp}: pp x dp x tp must be the {world} ranks, with pp >= 2")
        if BATCH % (dp * args.microbatches):
            raise SystemExit(f"--mesh {pp},{dp},{tp}: dp x microbatches must divide the batch of {BATCH}")
        mesh = init_device_mesh("neuron", (pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))
        for name in args.schedules:
            per_rank = 2 if name == "interleaved" else 1
            expected = cpu_losses(pp * per_rank * args.layers_per_stage, args.steps, args.lr)
            start = time.perf_counter()
            losses = train(name, args, mesh, device)
            seconds = time.perf_counter() - start
            if losses is not None and mesh["dp"].get_local_rank() == 0 and mesh["tp"].get_local_rank() == 0:
                ok = all(abs(a - b) <= args.rtol * abs(b) for a, b in zip(losses, expected, strict=True)) \
                    and losses[-1] < losses[0]
                failed |= not ok
                print(f"schedule {name} pp={pp} dp={dp} tp={tp} microbatches={args.microbatches}: "
                      f"{'ok' if ok else 'FAIL'} losses {[round(x, 6) for x in losses]} cpu "
                      f"{[round(x, 6) for x in expected]} ({seconds:.1f} s)", flush=True)
            dist.barrier()
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
