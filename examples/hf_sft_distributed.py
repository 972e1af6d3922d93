"""Distributed TRL fine-tuning on neuron: torchrun + Transformers' DistributedConfig (tensor parallel x FSDP2)
passed through SFTTrainer to from_pretrained. Weights are sharded while loading, the Trainer recognises the
already-distributed model (no --fsdp flag, no Accelerate FSDP config), and trainer.save_model() writes a standard
safetensors checkpoint that plain CPU PyTorch (no plugin) loads, giving the same logits.

    python examples/hf_sft_distributed.py --tp 2 --fsdp 2      # build, CPU reference, torchrun 4 ranks, compare
    python examples/hf_sft_distributed.py --tp 2 --fsdp 1 --max_length 2048

    # what runs on every rank (the user's command):
    torchrun --nproc-per-node 4 examples/hf_sft_distributed.py --worker --tp 2 --fsdp 2 --model DIR --out RESULT_DIR

The TRL/Transformers details this relies on (TRL 1.16, Transformers 5.23):
  * TRL defaults device_map="auto" on a multi-process neuron run, which Transformers rejects together with
    tp_size > 1: model_init_kwargs={"device_map": None, "distributed_config": {...}} (also from the TRL CLI as
    --model_init_kwargs '{"device_map": null, "distributed_config": {"tp_size": 2, "fsdp_size": 2}}').
  * A model distributed by from_pretrained cannot checkpoint its optimizer state through the Trainer:
    save_only_model=True or save_strategy="no" (to resume such a run: hf_sft_fault_tolerant.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_common  # noqa: E402
import torch  # noqa: E402

import hf_sft  # noqa: E402

PROBE = "the neuron core runs matrix multiply on tensor engine"


def worker(args, sft_argv) -> None:
    import torch.distributed as dist
    from transformers import AutoTokenizer

    sft_argv = sft_argv + ["--model", args.model, "--compare_cpu", "false", "--save_only_model", "true"]
    script, config = hf_sft.parse(sft_argv)
    config.model_init_kwargs = {"device_map": None,
                                "distributed_config": {"tp_size": args.tp, "fsdp_size": args.fsdp}}
    trainer, result = hf_sft.train(script, config)  # Transformers initialises the "neuron" process group
    result["shapes"] = list(result["shapes"])  # the training batches only (the probe below runs the hook too)

    model = trainer.model
    rank = dist.get_rank()
    assert dist.get_backend() == "neuron", dist.get_backend()
    assert getattr(model, "is_distributed_loading_by_transformers", False), "model was not distributed at load"
    assert trainer.is_distributed_loading_by_transformers
    from torch.distributed.tensor import DTensor
    dtensors = [n for n, p in model.named_parameters() if isinstance(p, DTensor)]
    q = model.model.layers[0].self_attn.q_proj.weight
    placements = [str(pl) for pl in q.placements] if isinstance(q, DTensor) else []
    assert dtensors and q.to_local().numel() < q.numel(), "weights are not sharded"

    trainer.save_model(args.out)  # collective: every rank takes part, rank 0 writes

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    ids = tokenizer(PROBE, return_tensors="pt").input_ids.to(config.device)
    # the probe runs in fp32, like the CPU reload: drop the bf16-autocast wrapper the Trainer put on forward
    model = trainer.accelerator.unwrap_model(model, keep_fp32_wrapper=False)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    if isinstance(logits, DTensor):
        logits = logits.full_tensor()
    if rank == 0:
        result.update(world_size=dist.get_world_size(), backend=dist.get_backend(), sharded=len(dtensors),
                      q_local=list(q.to_local().shape), q_global=list(q.shape), q_placements=placements,
                      mesh=str(getattr(q, "device_mesh", "")), logits=logits.float().cpu().tolist(),
                      probe=ids.cpu().tolist(), files=sorted(os.listdir(args.out)))
        with open(os.path.join(args.out, "neuron_result.json"), "w") as f:
            json.dump(result, f)
        print(f"[rank 0] {len(dtensors)} DTensor parameters; q_proj local {tuple(q.to_local().shape)} of "
              f"{tuple(q.shape)} {placements}; saved {result['files']}")
    dist.barrier()


def launch(args, sft_argv) -> dict:
    world = args.tp * args.fsdp
    model_dir = args.model or hf_common.build_causal_lm(initializer_range=0.02)
    out = args.out or tempfile.mkdtemp(prefix="sft-dist-")

    # the same data on both sides: a dataset large enough for the run, of a size fixed here
    max_length = int(_flag(sft_argv, "--max_length", str(hf_sft.DEFAULTS["max_length"])))
    per_device = int(_flag(sft_argv, "--per_device_train_batch_size", str(hf_sft.DEFAULTS["per_device_train_batch_size"])))
    steps = int(_flag(sft_argv, "--max_steps", str(hf_sft.DEFAULTS["max_steps"])))
    if "--num_texts" not in sft_argv:
        sft_argv = sft_argv + ["--num_texts", str(max_length * per_device * args.fsdp * steps // 40 + 32)]
    # CPU reference: one process, the same global batch (per-device batch x data-parallel ranks)
    ref_argv = list(sft_argv)
    ref_argv = _set_flag(ref_argv, "--per_device_train_batch_size", str(per_device * args.fsdp))
    ref = hf_sft.cpu_reference(ref_argv + ["--model", model_dir], bf16=_bf16(sft_argv))

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}",
           os.path.abspath(__file__), "--worker", "--tp", str(args.tp), "--fsdp", str(args.fsdp),
           "--model", model_dir, "--out", out, *sft_argv]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"torchrun failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-8000:]}")
    with open(os.path.join(out, "neuron_result.json")) as f:
        res = json.load(f)

    # losses: the distributed neuron run against the single-process CPU run
    rtol = 5e-3 if res["bf16"] else 1e-4
    res["cpu_losses"] = ref["losses"]
    res["max_rel_diff"] = hf_sft.compare(res, ref, rtol)
    print(f"[dist] {res['sharded']} DTensor parameters; q_proj local {res['q_local']} of {res['q_global']} "
          f"{res['q_placements']} on {res['mesh']}")
    print(f"[dist tp={args.tp} fsdp={args.fsdp}] losses {['%.5f' % x for x in res['losses']]}")
    print(f"[dist] CPU losses {['%.5f' % x for x in ref['losses']]}; max rel diff {res['max_rel_diff']:.2e}")

    # the checkpoint: standard safetensors, loaded by plain CPU PyTorch without the plugin
    assert any(f.endswith(".safetensors") for f in res["files"]), res["files"]
    cpu = json.loads(hf_common.run_plain_cpu(f"""
import json
from transformers import AutoModelForCausalLM
m = AutoModelForCausalLM.from_pretrained({out!r}).eval()
with torch.no_grad():
    logits = m(input_ids=torch.tensor({res['probe']})).logits
print(json.dumps({{"logits": logits.tolist(), "dtype": str(m.dtype)}}))
""").strip().splitlines()[-1])
    res["reload_diff"] = hf_common.max_abs_diff(torch.tensor(cpu["logits"]), torch.tensor(res["logits"]))
    print(f"[dist] trainer.save_model() -> {out}; plain-CPU from_pretrained logits max|diff| {res['reload_diff']:.2e}")
    assert res["reload_diff"] <= 1e-4, res["reload_diff"]
    res["log"] = r.stdout + r.stderr
    return res


def _flag(argv, name, default):
    return argv[argv.index(name) + 1] if name in argv else default


def _set_flag(argv, name, value):
    argv = list(argv)
    if name in argv:
        argv[argv.index(name) + 1] = value
    else:
        argv += [name, value]
    return argv


def _bf16(argv) -> bool:
    return _flag(argv, "--bf16", "true").lower() in ("true", "1", "yes")  # TRL's default on neuron: bf16


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tp", type=int, default=2, help="tensor-parallel size")
    p.add_argument("--fsdp", type=int, default=2, help="FSDP2 (data-parallel sharding) size")
    p.add_argument("--model", help="local checkpoint dir (default: a tiny random Llama)")
    p.add_argument("--out", help="where trainer.save_model() writes (default: a temp dir)")
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args, sft_argv = p.parse_known_args(argv)  # everything else is an SFTConfig flag
    return worker(args, sft_argv) if args.worker else launch(args, sft_argv)


if __name__ == "__main__":
    main()
