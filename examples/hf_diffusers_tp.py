"""Tensor parallelism of a Flux transformer across NeuronCores, unmodified Diffusers: each rank holds 1/N of every
attention and MLP weight (the model's own `_tp_plan`), the c10d "neuron" backend joins them, and the image equals
the single-process CPU image.

    python examples/hf_diffusers_tp.py --tp 2            # builds the tiny pipeline, CPU reference, torchrun, compare
    python examples/hf_diffusers_tp.py --tp 4 --load-sharded   # shard while reading the checkpoint instead

    # what runs on every rank (the user's script), e.g. on a real checkpoint:
    torchrun --nproc-per-node 2 examples/hf_diffusers_tp.py --worker --path PIPELINE_DIR --out image.npy

Against CUDA the script differs only in the backend name ("neuron" instead of "nccl") and the device string.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_common  # noqa: E402,F401
import numpy as np  # noqa: E402
import torch  # noqa: E402

import hf_diffusers  # noqa: E402


def worker(args) -> None:
    import torch.distributed as dist
    from diffusers import FluxPipeline, FluxTransformer2DModel
    from diffusers.models._modeling_parallel import TensorParallelConfig

    dist.init_process_group(backend="neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    device = torch.device("neuron", local_rank)
    torch.neuron.set_device(device)
    tp = TensorParallelConfig(tp_degree=world)

    if args.load_sharded:
        # each rank reads only its slice of the planned weights from the safetensors file
        transformer = FluxTransformer2DModel.from_pretrained(args.path, subfolder="transformer", parallel_config=tp)
        pipe = FluxPipeline.from_pretrained(args.path, transformer=transformer)
    else:
        pipe = FluxPipeline.from_pretrained(args.path)  # on CPU
        pipe.transformer.enable_parallelism(config=tp)  # shards the CPU weights onto this rank's core
    pipe.to(device)
    pipe.set_progress_bar_config(disable=True)

    from torch.distributed.tensor import DTensor
    sharded = [n for n, p in pipe.transformer.named_parameters() if isinstance(p, DTensor)]
    assert sharded, "no parameter was sharded"
    q = pipe.transformer.transformer_blocks[0].attn.to_q.weight
    assert q.to_local().shape[0] * world == q.shape[0], (q.to_local().shape, q.shape)
    assert q.to_local().device == device

    image = hf_diffusers.generate(pipe, "flux", args.size, args.steps)
    if rank == 0:
        np.save(args.out, image)
        print(f"[tp rank 0] {len(sharded)} sharded parameters, local to_q {tuple(q.to_local().shape)} of "
              f"{tuple(q.shape)}; image {image.shape}")
    dist.barrier()
    dist.destroy_process_group()


def launch(args) -> dict:
    path = args.path or hf_diffusers.build_flux(tempfile.mkdtemp(prefix="tiny-flux-"))
    ref = hf_diffusers.generate(hf_diffusers.load("flux", path, "cpu"), "flux", args.size, args.steps)
    out = os.path.join(tempfile.mkdtemp(prefix="flux-tp-"), "image.npy")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.tp}",
           os.path.abspath(__file__), "--worker", "--path", path, "--out", out, "--size", str(args.size),
           "--steps", str(args.steps)] + (["--load-sharded"] if args.load_sharded else [])
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"torchrun failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}")
    image = np.load(out)
    diff = float(np.abs(image - ref).max())
    print(f"[tp={args.tp}] tensor-parallel image on neuron vs single-process CPU: max|diff| {diff:.2e}")
    assert image.shape == ref.shape and diff <= args.atol, diff
    return dict(tp=args.tp, diff=diff, log=r.stdout + r.stderr)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tp", type=int, default=2, help="tensor-parallel degree (ranks)")
    p.add_argument("--path", help="a saved FluxPipeline directory (default: build the tiny one)")
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--load-sharded", action="store_true",
                   help="from_pretrained(parallel_config=...) instead of enable_parallelism() on a loaded model")
    p.add_argument("--atol", type=float, default=1e-4)
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    return worker(args) if args.worker else launch(args)


if __name__ == "__main__":
    main()
