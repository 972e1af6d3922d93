"""Fault-tolerant distributed TRL fine-tuning on neuron: SFTTrainer on a model sharded at load (DistributedConfig,
tensor parallel x FSDP2) under `torchrun --max-restarts`, resumed with `trainer.train(resume_from_checkpoint=True)`
through torch_neuronx's DistributedCheckpointCallback (Transformers 5.23 cannot resume such a model by itself:
docs/fault-tolerance.md).

    python examples/hf_sft_fault_tolerant.py --tp 2 --fsdp 2          # an uninterrupted and a killed run, compared
    python examples/hf_sft_fault_tolerant.py --fault 1:3:step          # which rank dies, after how many steps, where

    # what runs on every rank (the user's command):
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --nproc-per-node 4 --max-restarts 2 --rdzv-backend c10d \\
        --rdzv-endpoint localhost:29400 examples/hf_sft_fault_tolerant.py --worker --tp 2 --fsdp 2 --model DIR \\
        --output_dir OUT --save_steps 2

The default faults, `2:4:save,1:5:step` (the i-th fires in attempt i; RANK:STEPS_DONE:PHASE): in the first attempt
rank 2 dies while checkpoint-4 is being saved (the Trainer's files are written, the sharded state is not); the
second attempt must resume from checkpoint-2, not from the torn checkpoint-4, and completes checkpoint-4; then rank
1 dies in the next step, before the optimizer step; the third attempt resumes from checkpoint-4 and finishes. The
losses of every step and the final weights must equal those of the run that was never interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_common  # noqa: E402
import torch  # noqa: E402

import hf_sft  # noqa: E402

DEFAULT_FAULTS = "2:4:save,1:5:step"


def fault_callback(spec: str):
    """A TrainerCallback that reports where each attempt starts and SIGKILLs this rank at the fault of this attempt:
    PHASE 'step' in the step after STEPS_DONE steps, before the optimizer step; 'save' while checkpoint-STEPS_DONE
    is saved, after the Trainer wrote its files and before DistributedCheckpointCallback wrote the sharded state
    (list this callback first)."""
    import torch.distributed as dist
    from transformers import TrainerCallback

    specs = [s.split(":") for s in spec.split(",") if s]
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    rank, steps_done, phase = (int(specs[attempt][0]), int(specs[attempt][1]), specs[attempt][2]) \
        if attempt < len(specs) else (-1, -1, "")

    def die(where):
        print(f"[rank {dist.get_rank()}] fault: SIGKILL {where}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    class Fault(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            if dist.get_rank() == 0:
                print(f"[rank 0] attempt {attempt} starts after {state.global_step} steps", flush=True)

        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            if phase == "step" and dist.get_rank() == rank and state.global_step == steps_done:
                die(f"in the step after {steps_done}, before the optimizer step")

        def on_save(self, args, state, control, **kwargs):
            if phase == "save" and dist.get_rank() == rank and state.global_step == steps_done:
                die(f"while saving checkpoint-{steps_done}")

    return Fault()


def worker(args, sft_argv) -> None:
    import torch.distributed as dist
    from torch_neuronx.distributed.trainer_checkpoint import DistributedCheckpointCallback

    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    sft_argv = sft_argv + ["--model", args.model, "--compare_cpu", "false", "--save_only_model", "true",
                           "--save_strategy", "steps"]
    script, config = hf_sft.parse(sft_argv)
    config.model_init_kwargs = {"device_map": None,
                                "distributed_config": {"tp_size": args.tp, "fsdp_size": args.fsdp}}
    callbacks = [fault_callback(args.fault), DistributedCheckpointCallback()]
    # a restarted attempt resumes from the newest complete checkpoint in output_dir
    trainer, result = hf_sft.train(script, config, callbacks=callbacks,
                                   resume_from_checkpoint=True if attempt > 0 else None)
    trainer.save_model(os.path.join(config.output_dir, "final"))  # collective: the gathered weights, for comparing
    if dist.get_rank() == 0:
        losses = {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}
        with open(os.path.join(config.output_dir, "result.json"), "w") as f:
            json.dump({"attempt": attempt, "losses": losses, "world_size": dist.get_world_size()}, f)
        print(f"[rank 0] attempt {attempt} finished: losses by step {losses}", flush=True)
    dist.barrier()


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(args, sft_argv, output_dir: str, fault: str) -> tuple[dict, str]:
    world = args.tp * args.fsdp
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={world}", "--max-restarts=2",
           "--monitor-interval=0.5", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}",
           os.path.abspath(__file__), "--worker", "--tp", str(args.tp), "--fsdp", str(args.fsdp),
           "--model", args.model, "--fault", fault, "--output_dir", output_dir, *sft_argv]
    # a fresh rendezvous store per attempt (docs/fault-tolerance.md: torch 2.13 reuses one otherwise)
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    log = r.stdout + r.stderr
    if r.returncode != 0:
        raise RuntimeError(f"torchrun failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-8000:]}")
    with open(os.path.join(output_dir, "result.json")) as f:
        return json.load(f), log


def launch(args, sft_argv) -> dict:
    args.model = args.model or hf_common.build_causal_lm(initializer_range=0.02)
    sft_argv = list(sft_argv)
    for flag, value in (("--max_steps", "6"), ("--save_steps", "2")):
        if flag not in sft_argv:
            sft_argv += [flag, value]
    root = tempfile.mkdtemp(prefix="sft-ft-")
    reference, _ = torchrun(args, sft_argv, os.path.join(root, "uninterrupted"), fault="")
    killed, log = torchrun(args, sft_argv, os.path.join(root, "killed"), fault=args.fault)
    print(f"[ft] uninterrupted losses {reference['losses']}")
    print(f"[ft] killed ({args.fault}), finished in attempt {killed['attempt']}: losses {killed['losses']}")

    from safetensors.torch import load_file
    final = [load_file(os.path.join(root, run, "final", "model.safetensors")) for run in ("uninterrupted", "killed")]
    different = sorted(k for k in final[0] if not torch.equal(final[0][k], final[1][k]))
    print(f"[ft] final weights: {len(final[0])} tensors, {len(different)} different")
    return dict(reference=reference, killed=killed, log=log, different=different, tensors=len(final[0]),
                root=root, incomplete=sorted(n for n in os.listdir(os.path.join(root, "killed"))
                                             if n.endswith(".incomplete")))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tp", type=int, default=2, help="tensor-parallel size")
    p.add_argument("--fsdp", type=int, default=2, help="FSDP2 (data-parallel sharding) size")
    p.add_argument("--model", help="local checkpoint dir (default: a tiny random Llama)")
    p.add_argument("--fault", default=DEFAULT_FAULTS, help="RANK:STEPS_DONE:step|save[,...]; the i-th in attempt i")
    p.add_argument("--timeout", type=int, default=1200)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args, sft_argv = p.parse_known_args(argv)  # everything else is an SFTConfig flag
    return worker(args, sft_argv) if args.worker else launch(args, sft_argv)


if __name__ == "__main__":
    main()
