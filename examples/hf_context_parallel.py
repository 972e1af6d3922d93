"""Long-sequence training with context parallelism on neuron: Accelerate's ParallelismConfig(cp_size=...) splits
every sequence over the ranks and runs attention as ring attention (PyTorch's context_parallel), with FSDP2
sharding the weights over the same ranks; a Transformers Llama trains with the losses of one CPU process.

    python examples/hf_context_parallel.py --cp 2                 # 2 ranks: CP 2 (FSDP2 over the CP ranks)
    python examples/hf_context_parallel.py --cp 2 --dp-shard 2    # 4 ranks: FSDP 2 x CP 2
    python examples/hf_context_parallel.py --cp 4 --seq 1024

What every rank runs is Accelerate's documented loop (Transformers' Trainer does the same when given a
ParallelismConfig with cp_size):

    accelerator = Accelerator(parallelism_config=ParallelismConfig(dp_shard_size=D, cp_size=C),
                              fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2))
    model, optimizer = accelerator.prepare(model, optimizer)
    with accelerator.maybe_context_parallel(buffers=[input_ids, labels, position_ids], buffer_seq_dims=[1, 1, 1],
                                            no_restore_buffers={input_ids, labels, position_ids}):
        loss = loss_fn(model(input_ids=input_ids, position_ids=position_ids).logits, labels)
        accelerator.backward(loss)

Each rank holds 1/C of every sequence (2C blocks, dealt so that causal attention's work is balanced); attention runs
the host's flash kernel block by block over the keys of every rank and merges the blocks by their log-sum-exp.
PyTorch 2.13's ring attention knows only CUDA's attention kernels: on neuron it runs through the plugin's shim
(torch_neuronx/integrations/context_parallel_attention.py). The labels are shifted before sharding, as Transformers'
Trainer does (`shift_labels`): a shard's last token predicts the first token of the next rank's shard.

Tensor parallelism with it (`ParallelismConfig(tp_size=T, cp_size=C)`) stops in Accelerate 1.16 itself, on any
device: with FSDP2, `Accelerator.prepare` imports `ReplicateParallel` from `transformers.integrations.tensor_parallel`
(accelerate/accelerator.py:1592), which Transformers 5.23 no longer has (ImportError).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_common  # noqa: E402,F401
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VOCAB = 384


def model(seed: int = 0):
    from transformers import LlamaForCausalLM
    torch.manual_seed(seed)
    return LlamaForCausalLM(hf_common.llama_config(vocab_size=VOCAB, attn_implementation="sdpa",
                                                   initializer_range=0.02))


def batch(step: int, rows: int, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences counting up from random starts (learnable): input ids and the next-token labels."""
    g = torch.Generator().manual_seed(1000 + step)
    tokens = (torch.randint(0, VOCAB, (rows, 1), generator=g) + torch.arange(seq + 1)) % VOCAB
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def loss_fn(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float().reshape(-1, VOCAB), labels.reshape(-1))


def cpu_losses(args) -> list[float]:
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    losses = []
    for step in range(args.steps):
        ids, labels = batch(step, args.rows, args.seq)
        loss = loss_fn(net(input_ids=ids).logits, labels)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def worker(args) -> None:
    import torch.distributed as dist
    from accelerate import Accelerator
    from accelerate.utils import FullyShardedDataParallelPlugin, ParallelismConfig

    accelerator = Accelerator(parallelism_config=ParallelismConfig(dp_shard_size=args.dp_shard, cp_size=args.cp),
                              fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2))
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    net, opt = accelerator.prepare(net, opt)
    mesh = accelerator.torch_device_mesh
    dp_rank = mesh["dp_shard"].get_local_rank() if args.dp_shard > 1 else 0
    rows = args.rows // args.dp_shard  # the FSDP ranks split the batch; the CP ranks of one share its rows
    losses, local_tokens = [], None
    for step in range(args.steps):
        ids, labels = (t[dp_rank * rows:(dp_rank + 1) * rows].to(accelerator.device)
                       for t in batch(step, args.rows, args.seq))
        positions = torch.arange(args.seq, device=accelerator.device).expand(rows, -1).contiguous()
        buffers = [ids, labels, positions]
        with accelerator.maybe_context_parallel(buffers=buffers, buffer_seq_dims=[1, 1, 1],
                                                no_restore_buffers=set(buffers)):
            local_tokens = ids.shape[1]
            loss = loss_fn(net(input_ids=ids, position_ids=positions).logits, labels)
            accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)  # every rank holds as many tokens: the global mean
        losses.append(mean.item())
    if dist.get_rank() == 0:
        q = net.model.layers[0].self_attn.q_proj.weight
        with open(os.path.join(args.out, "result.json"), "w") as f:
            json.dump(dict(losses=losses, world=dist.get_world_size(), local_tokens=local_tokens,
                           mesh=str(mesh), q_local=list(q.to_local().shape), q_global=list(q.shape),
                           device=str(q.device)), f)
    accelerator.wait_for_everyone()
    accelerator.end_training()


def launch(args) -> dict:
    out = tempfile.mkdtemp(prefix="hf-cp-")
    world = args.cp * args.dp_shard
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}",
           os.path.abspath(__file__), "--worker", "--out", out, "--cp", str(args.cp), "--dp-shard", str(args.dp_shard),
           "--seq", str(args.seq), "--rows", str(args.rows), "--steps", str(args.steps), "--lr", str(args.lr)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                       env=dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1"))
    if r.returncode != 0:
        raise RuntimeError(f"torchrun failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}")
    result = json.load(open(os.path.join(out, "result.json")))
    result["cpu_losses"] = expected = cpu_losses(args)
    worst = max(abs(a - b) / abs(b) for a, b in zip(result["losses"], expected, strict=True))
    result["max_relative_diff"] = worst
    print(f"[cp={args.cp} dp_shard={args.dp_shard}] {world} ranks, {args.seq} tokens per sequence, "
          f"{result['local_tokens']} per rank; q_proj {result['q_local']} of {result['q_global']} on each rank")
    print(f"  losses {[round(x, 6) for x in result['losses']]}\n  cpu    {[round(x, 6) for x in expected]}  "
          f"(max relative difference {worst:.1e})")
    assert worst <= args.rtol and result["losses"][-1] < result["losses"][0], result
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cp", type=int, default=2, help="context-parallel ranks (each sequence split over them)")
    p.add_argument("--dp-shard", type=int, default=1, help="FSDP ranks (the batch split over them)")
    p.add_argument("--seq", type=int, default=256, help="tokens per sequence (a multiple of 2 x cp)")
    p.add_argument("--rows", type=int, default=2, help="sequences per step (a multiple of dp-shard)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.cp < 2:
        raise SystemExit("--cp must be at least 2 (this example is about context parallelism)")
    if args.seq % (2 * args.cp) or args.rows % args.dp_shard:
        raise SystemExit(f"--seq must be a multiple of 2 x cp ({2 * args.cp}) and --rows of --dp-shard")
    return worker(args) if args.worker else launch(args)


if __name__ == "__main__":
    main()
