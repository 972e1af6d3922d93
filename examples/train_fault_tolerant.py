"""Fault-tolerant 2-D parallel training on neuron: TP x FSDP2 under `torchrun --max-restarts`, a committed
torch.distributed.checkpoint (DCP) checkpoint every SAVE_EVERY steps, resumed by the next attempt.

    export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1          # a fresh rendezvous store per attempt (see below)
    RUN="torchrun --nproc-per-node 4 --max-restarts 2 --rdzv-backend c10d --rdzv-endpoint localhost:29400"
    CKPT_DIR=/tmp/ft $RUN examples/train_fault_tolerant.py                  # TP 2 x FSDP 2
    # kill ranks on purpose: rank 1 in step 7 of the first attempt; then rank 2 while writing the checkpoint of
    # step 6 in the first attempt and rank 1 in step 7 of the second (the i-th fault fires in attempt i)
    FAULT_AT=1:7:step CKPT_DIR=/tmp/ft $RUN examples/train_fault_tolerant.py
    FAULT_AT=2:6:save,1:7:step CKPT_DIR=/tmp/ft $RUN examples/train_fault_tolerant.py
    # resharding: save under TP 2 x FSDP 4, continue (or just load: STEPS = the saved step) under TP 4 x FSDP 2
    TORCHNEURON_INSTANCE=trn2.48xlarge TP_SIZE=2 CKPT_DIR=/tmp/rs torchrun --nproc-per-node 8 examples/train_fault_tolerant.py
    TORCHNEURON_INSTANCE=trn2.48xlarge TP_SIZE=4 STEPS=12 CKPT_DIR=/tmp/rs torchrun --nproc-per-node 8 examples/train_fault_tolerant.py

When a rank dies, torchrun stops the others (their next collective fails at once) and, with --max-restarts,
starts every rank again. The new attempt loads the newest *committed* checkpoint (torch_neuronx.distributed.
checkpoint: written to `step_N.partial/`, renamed to `step_N/` only once every rank's shards and the metadata are
on disk) and continues; what it computes is bit-identical to a run that was never interrupted: the batch of a
step is a function of the step number, and the checkpoint holds the sharded parameters and optimizer state.
A checkpoint torn by a kill is never loaded, so a kill costs at most SAVE_EVERY steps.

Launch restartable jobs with the c10d rendezvous and TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: torch 2.13's torchrun
otherwise hands every attempt the same TCPStore, the restarted ranks can read the previous attempt's addresses,
and the new process group fails to connect ("Gloo connectFullMesh failed ... Connection refused"; with gloo on
CPU too). docs/fault-tolerance.md has the details.

Environment: CKPT_DIR (required), TP_SIZE (2), FSDP_SIZE (world // TP_SIZE), STEPS (10), SAVE_EVERY (3),
DIM (64), LAYERS (2), SEQ (16), GLOBAL_BATCH (4 sequences per step, split over the FSDP ranks),
FAULT_AT (RANK:STEP:PHASE[,...], PHASE = step | save: that rank SIGKILLs itself; the i-th fault in attempt i),
RESULT (rank 0 writes the final model + optimizer state, gathered on CPU, there with torch.save).
"""

from __future__ import annotations

import os
import signal
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.distributed.checkpoint import FileSystemWriter  # noqa: E402
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_state_dict,  # noqa: E402
                                                     set_state_dict)
from torch.distributed.checkpoint.stateful import Stateful  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402

from torch_neuronx.distributed import checkpoint  # noqa: E402
from train_tp_fsdp import VOCAB, Transformer, apply_fsdp, apply_tensor_parallel  # noqa: E402

HEADS = 8


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


class TrainState(Stateful):
    """Model and optimizer as one DCP entry. Keys are parameter names (flattened optimizer state), values the
    sharded DTensors: DCP stores each shard with its place in the global tensor, so the checkpoint loads under
    any other mesh, or on one CPU process."""

    OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)

    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def state_dict(self):
        model, optimizer = get_state_dict(self.model, self.optimizer, options=self.OPTIONS)
        return {"model": model, "optimizer": optimizer}

    def load_state_dict(self, state):
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optimizer"], options=self.OPTIONS)


class Fault:
    """FAULT_AT=RANK:STEP:PHASE[,RANK:STEP:PHASE...]: the i-th fault fires in attempt i (torchrun counts attempts in
    TORCHELASTIC_RESTART_COUNT), so a restarted attempt does not repeat the fault that ended the one before. The
    rank named SIGKILLs itself: nothing runs after it, as when a host dies."""

    def __init__(self, rank: int):
        specs = [s for s in os.environ.get("FAULT_AT", "").split(",") if s]
        attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        self.step = self.phase = None
        for spec in specs:
            if len(spec.split(":")) != 3 or spec.split(":")[2] not in ("step", "save"):
                raise SystemExit(f"FAULT_AT={spec}: expected RANK:STEP:PHASE with PHASE 'step' or 'save'")
        if attempt < len(specs):
            fault_rank, step, phase = specs[attempt].split(":")
            if int(fault_rank) == rank:
                self.step, self.phase = int(step), phase

    def at(self, step: int, phase: str) -> bool:
        return (self.step, self.phase) == (step, phase)

    @staticmethod
    def die(where: str) -> None:
        print(f"[rank {dist.get_rank()}] FAULT_AT: SIGKILL {where}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


class DyingWriter(FileSystemWriter):
    """DCP's file writer that SIGKILLs the process once its own shards are on disk: the other ranks may still be
    writing theirs, no .metadata exists yet. The directory is left torn."""

    def write_data(self, plan, planner):
        super().write_data(plan, planner).wait()
        Fault.die(f"after writing its shards to {self.path}")


def batch(step: int, dp_rank: int, dp: int, global_batch: int, seq: int):
    """The rows of this FSDP rank of the global batch of `step`: a function of the step alone, so a resumed run
    sees exactly the batches the interrupted one would have, under any mesh."""
    g = torch.Generator().manual_seed(step)
    starts = torch.randint(0, VOCAB, (global_batch, 1), generator=g)
    tokens = (starts + torch.arange(seq + 1)) % VOCAB  # count up from a random start: learnable
    rows = global_batch // dp
    return tokens[dp_rank * rows:(dp_rank + 1) * rows]


def main() -> None:
    warnings.filterwarnings("ignore", message="FSDP2-wrapped module .* returned a view tensor")
    root = os.environ.get("CKPT_DIR") or sys.exit("set CKPT_DIR to the checkpoint directory (shared by all ranks)")
    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    device = torch.device("neuron", torch.neuron.current_device())
    tp = env_int("TP_SIZE", 2)
    dp = env_int("FSDP_SIZE", world // tp)
    dim, layers, seq = env_int("DIM", 64), env_int("LAYERS", 2), env_int("SEQ", 16)
    steps, save_every, global_batch = env_int("STEPS", 10), env_int("SAVE_EVERY", 3), env_int("GLOBAL_BATCH", 4)
    if dp * tp != world or HEADS % tp or seq % tp or global_batch % dp:
        raise SystemExit(f"FSDP_SIZE x TP_SIZE = {dp} x {tp} must equal the {world} ranks, TP_SIZE divide the "
                         f"{HEADS} heads and SEQ={seq}, FSDP_SIZE divide GLOBAL_BATCH={global_batch}")
    fault = Fault(rank)

    mesh = init_device_mesh("neuron", (dp, tp), mesh_dim_names=("dp", "tp"))
    if dp > 1 and tp > 1:
        mesh["dp", "tp"]._flatten("dp_tp")  # one all_reduce for the global gradient norm
    torch.manual_seed(0)
    model = Transformer(dim, layers, HEADS).to(device)
    if tp > 1:
        apply_tensor_parallel(model, mesh["tp"])
    apply_fsdp(model, mesh["dp"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    state = {"train": TrainState(model, optimizer)}

    start = checkpoint.load(state, root) or 0
    if rank == 0:
        print(f"attempt {attempt}: mesh dp={dp} x tp={tp}; " +
              (f"resumed from {checkpoint.step_dir(root, start)}" if start else "no checkpoint: step 0"), flush=True)

    dp_rank, dp_group = mesh["dp"].get_local_rank(), mesh["dp"].get_group()
    for step in range(start, steps):
        tokens = batch(step, dp_rank, dp, global_batch, seq).to(device)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        loss.backward()
        if fault.at(step, "step"):
            Fault.die(f"in step {step}, between backward and the optimizer step")
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        mean = loss.detach()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG, group=dp_group)
        if rank == 0:
            print(f"step {step} loss {mean.item():.6f}", flush=True)
        done = step + 1
        if done % save_every == 0 or done == steps:
            writer = DyingWriter(root) if fault.at(done, "save") else None
            path = checkpoint.save(state, root, done, storage_writer=writer)
            if rank == 0:
                print(f"saved {path}", flush=True)

    if os.environ.get("RESULT"):
        options = StateDictOptions(full_state_dict=True, cpu_offload=True, flatten_optimizer_state_dict=True)
        model_state, optimizer_state = get_state_dict(model, optimizer, options=options)
        if rank == 0:
            torch.save({"model": model_state, "optimizer": optimizer_state, "step": steps}, os.environ["RESULT"])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
