"""Tensor parallelism of every Diffusers transformer that carries a `_tp_plan`, across NeuronCores, unmodified
Diffusers: each rank holds 1/N of every planned attention and MLP weight, the c10d "neuron" backend joins them, and
the output equals one CPU process's.

    python examples/hf_diffusers_tp.py --tp 2          # every planned transformer: build tiny, CPU reference, torchrun
    python examples/hf_diffusers_tp.py --tp 4 --models FluxTransformer2DModel --compile-ways   # eager only

For each transformer class of the installed Diffusers whose `_tp_plan` is set (Flux, Flux2, QwenImage, QwenImage-2.1
in Diffusers 0.42.1), the launcher saves a tiny random model like a real checkpoint (safetensors), computes its output
on CPU, then starts one `torchrun` in which every rank, for each model:

  1. shards after loading: `from_pretrained(path)` on CPU, then
     `model.enable_parallelism(config=TensorParallelConfig(tp_degree=N))`
  2. shards while loading: `from_pretrained(path, parallel_config=TensorParallelConfig(tp_degree=N))`

and runs each eager and compiled (`torch.compile(backend="neuron")`; `--compile-ways` picks after which way) on
`neuron:LOCAL_RANK`; each rank's output is compared with the CPU output. Every rank also runs the whole tiny Flux
pipeline with its transformer sharded; rank 0's image is compared with the CPU image. What runs on every rank is the
user's script:

    dist.init_process_group("neuron")
    model = FluxTransformer2DModel.from_pretrained(path, parallel_config=TensorParallelConfig(tp_degree=world_size))
    model.to(f"neuron:{local_rank}")

Against CUDA the script differs only in the backend name ("neuron" instead of "nccl") and the device string.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_common  # noqa: E402,F401
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch_neuronx  # noqa: E402

import hf_diffusers  # noqa: E402

WAYS = ("enable_parallelism", "from_pretrained")
ATOL = 1e-4  # fp32: sharded matmuls and the all-reduce sum in another order than one CPU matmul


# ---- tiny configs and inputs of the planned transformers ------------------------------------------------------------
# Every head count and FFN width is divisible by 4, so each model shards over 2 or 4 ranks.

def _flux_inputs(g: torch.Generator) -> dict:
    h = w = 4
    img_ids = torch.cartesian_prod(torch.zeros(1, dtype=torch.long), torch.arange(h), torch.arange(w))
    return {"hidden_states": torch.randn(1, h * w, 4, generator=g),
            "encoder_hidden_states": torch.randn(1, 8, 32, generator=g),
            "pooled_projections": torch.randn(1, 32, generator=g),
            "timestep": torch.tensor([0.5]),
            "img_ids": img_ids.float(), "txt_ids": torch.zeros(8, 3)}


def _flux2_inputs(g: torch.Generator) -> dict:
    h = w = 4
    txt = 8
    img_ids = torch.cartesian_prod(torch.arange(1), torch.arange(h), torch.arange(w), torch.arange(1))[None]
    txt_ids = torch.cartesian_prod(torch.arange(1), torch.arange(1), torch.arange(1), torch.arange(txt))[None]
    return {"hidden_states": torch.randn(1, h * w, 4, generator=g),
            "encoder_hidden_states": torch.randn(1, txt, 32, generator=g),
            "timestep": torch.tensor([0.5]), "guidance": torch.tensor([3.5]),
            "img_ids": img_ids, "txt_ids": txt_ids}


def _qwenimage_inputs(g: torch.Generator) -> dict:
    txt = 8
    return {"hidden_states": torch.randn(1, 16, 16, generator=g),
            "encoder_hidden_states": torch.randn(1, txt, 16, generator=g),
            "encoder_hidden_states_mask": torch.ones(1, txt, dtype=torch.long),
            "timestep": torch.tensor([0.5]), "img_shapes": [(1, 4, 4)]}


def _qwenimage21_inputs(g: torch.Generator) -> dict:
    txt, h, w = 8, 4, 4
    # the vision-language sequence: the prompt's tokens, then one slot per 2x2 group of the target image's tokens
    img_mask = torch.cat([torch.zeros(1, txt, dtype=torch.bool), torch.ones(1, h * w // 4, dtype=torch.bool)], 1)
    return {"hidden_states": torch.randn(1, h * w, 4, generator=g),
            "encoder_hidden_states": torch.randn(1, txt, 32, generator=g),
            "timestep": torch.tensor([0.5]), "img_shapes": [[(1, h, w)]], "img_mask": img_mask}


TINY = {
    "FluxTransformer2DModel": (dict(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                    attention_head_dim=8, num_attention_heads=4, joint_attention_dim=32,
                                    pooled_projection_dim=32, axes_dims_rope=[2, 2, 4]), _flux_inputs),
    "Flux2Transformer2DModel": (dict(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                     attention_head_dim=8, num_attention_heads=4, joint_attention_dim=32,
                                     timestep_guidance_channels=32, axes_dims_rope=[2, 2, 2, 2]), _flux2_inputs),
    "QwenImageTransformer2DModel": (dict(patch_size=2, in_channels=16, out_channels=4, num_layers=1,
                                         attention_head_dim=8, num_attention_heads=4, joint_attention_dim=16,
                                         axes_dims_rope=(2, 2, 4)), _qwenimage_inputs),
    "QwenImage21Transformer2DModel": (dict(patch_size=1, in_channels=4, out_channels=4, num_layers=1,
                                           attention_head_dim=8, num_attention_heads=4, context_in_dim=32,
                                           axes_dims_rope=(2, 2, 4)),
                                      _qwenimage21_inputs),
}


@functools.lru_cache(maxsize=None)
def planned_classes(plan: str = "_tp_plan") -> tuple[str, ...]:
    """Every transformer class of the installed Diffusers with a tensor-parallel plan (`_tp_plan`), or another plan
    (`_cp_plan`: the context-parallel one, examples/hf_diffusers_cp.py)."""
    import importlib
    import pkgutil

    import diffusers.models.transformers as pkg
    from diffusers import ModelMixin

    found = set()
    for info in pkgutil.iter_modules(pkg.__path__):
        try:
            module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        except ImportError:  # a model whose optional dependency is missing cannot be planned here either
            continue
        for name, obj in vars(module).items():
            if isinstance(obj, type) and issubclass(obj, ModelMixin) and obj.__module__ == module.__name__ \
                    and getattr(obj, plan, None):
                found.add(name)
    return tuple(sorted(found))


def _to(inputs: dict, device) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def build(name: str, root: str, seed: int = 0, tiny: dict | None = None) -> str:
    """Save the tiny `name` (safetensors, as from_pretrained reads it), its inputs and CPU output under root/name
    (its config and inputs from `tiny`, default TINY)."""
    import diffusers

    config, make_inputs = (tiny or TINY)[name]
    path = os.path.join(root, name)
    torch.manual_seed(seed)
    model = getattr(diffusers, name)(**config).eval()
    model.save_pretrained(path)
    inputs = make_inputs(torch.Generator().manual_seed(seed))
    with torch.no_grad():
        reference = model(**inputs, return_dict=False)[0]
    torch.save({"inputs": inputs, "reference": reference}, os.path.join(path, "io.pt"))
    return path


# ---- what every rank runs --------------------------------------------------------------------------------------------

def load_sharded(name: str, path: str, way: str, world: int, device: torch.device):
    import diffusers
    from diffusers.models._modeling_parallel import TensorParallelConfig
    from torch.distributed.tensor import DTensor

    cls = getattr(diffusers, name)
    tp = TensorParallelConfig(tp_degree=world)
    if way == "enable_parallelism":
        model = cls.from_pretrained(path)  # on CPU
        model.enable_parallelism(config=tp)  # shards the planned CPU weights onto this rank's core
    else:
        model = cls.from_pretrained(path, parallel_config=tp)  # reads only this rank's slice of each planned weight
    model.to(device).eval()
    sharded = {n: p for n, p in model.named_parameters() if isinstance(p, DTensor)}
    assert sharded, f"{name} ({way}): no parameter was sharded"
    for n, p in sharded.items():
        local = p.to_local()
        assert local.device == device, (n, local.device)
        assert local.numel() * world == p.numel() or p.placements[0].is_replicate(), (n, local.shape, p.shape)
    return model, len(sharded)


def run_models(args, rank: int, world: int, device: torch.device) -> list[dict]:
    rows = []
    for name in args.models:
        path = os.path.join(args.root, name)
        io = torch.load(os.path.join(path, "io.pt"))
        inputs = _to(io["inputs"], device)
        for way in WAYS:
            model, n_sharded = load_sharded(name, path, way, world, device)
            modes = ("eager", "compiled") if way in args.compile_ways else ("eager",)
            for mode in modes:
                t0 = time.monotonic()
                if mode == "compiled":
                    torch._dynamo.reset()
                    model.compile(backend="neuron", dynamic=False)
                row = dict(model=name, way=way, mode=mode, rank=rank, sharded=n_sharded)
                try:
                    with torch.no_grad():
                        out = model(**inputs, return_dict=False)[0]
                    row.update(shape=list(out.shape), device=str(out.device),
                               diff=float((out.float().cpu() - io["reference"]).abs().max()))
                except Exception as e:  # noqa: BLE001 - reported per model, the launcher fails with it
                    row["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
                row["seconds"] = round(time.monotonic() - t0, 1)
                if mode == "compiled":
                    stats = torch_neuronx.compile_stats()
                    row.update(graphs=stats["graphs_compiled"], cache_hits=stats["cache_hits"])
                rows.append(row)
            del model
    return rows


def run_pipeline(args, world: int, device: torch.device) -> np.ndarray:
    """The whole tiny Flux pipeline, its transformer sharded (the way a user runs a real one)."""
    from diffusers import FluxPipeline
    from diffusers.models._modeling_parallel import TensorParallelConfig

    pipe = FluxPipeline.from_pretrained(args.pipeline_path)  # on CPU
    pipe.transformer.enable_parallelism(config=TensorParallelConfig(tp_degree=world))
    pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    return hf_diffusers.generate(pipe, "flux", 32, 2)


def worker(args) -> None:
    import torch.distributed as dist

    dist.init_process_group(backend="neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron", int(os.environ.get("LOCAL_RANK", rank)))
    torch.neuron.set_device(device)
    rows = run_models(args, rank, world, device)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump(rows, f)
    if args.pipeline_path:
        image = run_pipeline(args, world, device)
        if rank == 0:
            np.save(os.path.join(args.out, "image.npy"), image)
    dist.barrier()
    dist.destroy_process_group()


# ---- the launcher ----------------------------------------------------------------------------------------------------

def launch(args) -> dict:
    root = tempfile.mkdtemp(prefix="tiny-tp-models-")
    for name in args.models:
        build(name, root)
    pipeline = None
    if args.pipeline:
        pipeline = hf_diffusers.build_flux(tempfile.mkdtemp(prefix="tiny-flux-"))
        ref_image = hf_diffusers.generate(hf_diffusers.load("flux", pipeline, "cpu"), "flux", 32, 2)
    out = tempfile.mkdtemp(prefix="diffusers-tp-")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.tp}",
           os.path.abspath(__file__), "--worker", "--root", root, "--out", out, "--models", *args.models] \
        + (["--pipeline-path", pipeline] if pipeline else []) + ["--compile-ways", *args.compile_ways]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"torchrun failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}")
    rows = [row for k in range(args.tp) for row in json.load(open(os.path.join(out, f"rank{k}.json")))]
    for row in rows:
        if row["rank"] == 0:
            what = row.get("error") or f"max|diff| {row['diff']:.2e}  ({row['sharded']} sharded parameters)"
            print(f"[tp={args.tp}] {row['model']:32s} {row['way']:18s} {row['mode']:8s} vs CPU: {what}")
    bad = [row for row in rows if "error" in row or row["diff"] > args.atol]
    result = dict(tp=args.tp, rows=rows, log=r.stdout + r.stderr)
    if pipeline:
        image = np.load(os.path.join(out, "image.npy"))
        result["image_diff"] = float(np.abs(image - ref_image).max())
        print(f"[tp={args.tp}] Flux pipeline, transformer sharded, image vs CPU: max|diff| {result['image_diff']:.2e}")
        assert image.shape == ref_image.shape and result["image_diff"] <= args.atol, result["image_diff"]
    assert not bad, "\n".join(json.dumps(b) for b in bad)
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tp", type=int, default=2, help="tensor-parallel degree (ranks)")
    p.add_argument("--models", nargs="+", default=None,
                   help="transformer classes (default: every class of the installed Diffusers with a _tp_plan)")
    p.add_argument("--compile-ways", nargs="*", choices=WAYS, default=list(WAYS),
                   help="after which ways of sharding the model is also compiled (default both; none: eager only)")
    p.add_argument("--no-pipeline", dest="pipeline", action="store_false",
                   help="skip the whole Flux pipeline with its transformer sharded")
    p.add_argument("--atol", type=float, default=ATOL)
    p.add_argument("--timeout", type=int, default=1200)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--root", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--pipeline-path", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    args.models = args.models or list(planned_classes())
    missing = [m for m in args.models if m not in TINY]
    if missing:
        raise SystemExit(f"no tiny config for {', '.join(missing)}: add one to TINY in {__file__}")
    return launch(args)


if __name__ == "__main__":
    main()
