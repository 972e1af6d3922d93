"""Accelerate on neuron, unmodified: Accelerator() picks the neuron device by itself; prepare() moves the model,
the optimizer and a pinned-memory DataLoader there; gradient accumulation and mixed precision work; the losses
equal the same loop in plain PyTorch on CPU; save_model() writes a checkpoint that loads on CPU.

    python examples/hf_accelerate.py
    python examples/hf_accelerate.py --mixed-precision bf16 --steps 12
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_common  # noqa: E402
import torch  # noqa: E402


def dataset(tokenizer, n: int, seq_len: int):
    ids = [t for row in tokenizer(hf_common.sample_texts(4 * n, seed=3)).input_ids for t in row]
    blocks = torch.tensor(ids[: n * seq_len]).view(n, seq_len)
    return [{"input_ids": b, "labels": b} for b in blocks]


def cpu_reference(path, data, batch_size, accum, lr, bf16):
    """The same training in plain PyTorch on CPU (no Accelerate)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    loader = torch.utils.data.DataLoader(data, batch_size=batch_size)
    losses = []
    for i, batch in enumerate(loader):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(**batch).loss
        (loss / accum).backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="local checkpoint (default: a tiny random Llama)")
    p.add_argument("--steps", type=int, default=6, help="micro-batches")
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--grad-accum", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--mixed-precision", default="no", choices=["no", "bf16"])
    p.add_argument("--place-model-first", action="store_true",
                   help="model.to(accelerator.device) before creating the optimizer (instead of letting prepare() "
                        "move it)")
    args = p.parse_args(argv)

    from accelerate import Accelerator
    from accelerate.utils import is_neuron_available
    from transformers import AutoModelForCausalLM, AutoTokenizer

    accelerator = Accelerator(mixed_precision=args.mixed_precision, gradient_accumulation_steps=args.grad_accum)
    print(f"[accelerate] is_neuron_available()={is_neuron_available()} device={accelerator.device} "
          f"distributed_type={accelerator.distributed_type} mixed_precision={accelerator.mixed_precision}")
    assert accelerator.device.type == "neuron", accelerator.device

    path = args.model or hf_common.build_causal_lm(initializer_range=0.02)
    tokenizer = AutoTokenizer.from_pretrained(path)
    data = dataset(tokenizer, args.steps * args.batch_size, args.seq_len)

    model = AutoModelForCausalLM.from_pretrained(path)  # on CPU: prepare() places it
    if args.place_model_first:
        model.to(accelerator.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, pin_memory=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    assert next(model.parameters()).device.type == "neuron"
    # As on CUDA, moving the model keeps its Parameter objects, so the optimizer made from the CPU model steps the
    # neuron weights (Accelerate re-points optimizers only for XLA/TPU).
    stepped = {id(q) for group in optimizer.param_groups for q in group["params"]}
    stale = [n for n, q in model.named_parameters() if id(q) not in stepped]
    assert not stale, (f"{len(stale)} parameters are not in the optimizer after prepare(): model.to('neuron') "
                       "replaced the Parameter objects (torch._has_compatible_shallow_copy_type(cpu, neuron) is "
                       "False: the plugin predates the fix); --place-model-first avoids it")

    model.train()
    losses = []
    for batch in loader:
        assert batch["input_ids"].device.type == "neuron"
        with accelerator.accumulate(model):
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        losses.append(loss.item())

    bf16 = args.mixed_precision == "bf16"
    cpu_losses = cpu_reference(path, data, args.batch_size, args.grad_accum, args.lr, bf16)
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, cpu_losses))
    print(f"[accelerate] neuron losses {['%.5f' % x for x in losses]}")
    print(f"[accelerate] CPU    losses {['%.5f' % x for x in cpu_losses]}  max rel diff {worst:.2e}")
    rtol = 5e-3 if bf16 else 1e-5
    assert len(losses) == len(cpu_losses) == args.steps and worst <= rtol, (worst, rtol)

    out = tempfile.mkdtemp(prefix="accelerate-save-")
    accelerator.save_model(model, out)  # safetensors
    model.eval()
    probe = data[0]["input_ids"][None]
    with torch.no_grad():
        neuron_logits = model(input_ids=probe.to(accelerator.device)).logits
    from safetensors.torch import load_file
    files = [f for f in os.listdir(out) if f.endswith(".safetensors")]
    assert files, os.listdir(out)
    state = {}
    for f in files:
        state.update(load_file(os.path.join(out, f)))  # plain CPU tensors
    cpu_model = AutoModelForCausalLM.from_pretrained(path).eval()
    missing, unexpected = cpu_model.load_state_dict(state, strict=False)
    assert not unexpected and all("rotary" in k for k in missing), (missing, unexpected)
    with torch.no_grad():
        cpu_logits = cpu_model(input_ids=probe).logits
    d = hf_common.max_abs_diff(cpu_logits, neuron_logits)
    print(f"[accelerate] save_model -> {out} ({', '.join(files)}); reloaded on CPU: logits max|diff| {d:.2e}")
    assert d <= 1e-4, d
    return dict(device=str(accelerator.device), distributed_type=str(accelerator.distributed_type),
                losses=losses, cpu_losses=cpu_losses, max_rel_diff=worst, reload_diff=d)


if __name__ == "__main__":
    main()
