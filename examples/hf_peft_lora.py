"""PEFT LoRA fine-tuning on neuron, unmodified PEFT: the same loop on neuron and on CPU gives the same losses;
the adapter saved on neuron loads on a plain CPU install (no plugin) and reproduces the neuron logits.

    python examples/hf_peft_lora.py                 # fp32, LoRA dropout on (same seed -> same masks on neuron)
    python examples/hf_peft_lora.py --steps 20 --bf16

The training loop is the one from PEFT's documentation; only the device string says "neuron".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_common  # noqa: E402
import torch  # noqa: E402


def batches(tokenizer, steps: int, batch_size: int, seq_len: int):
    """Fixed blocks of tokens (the same on every device)."""
    ids = [t for row in tokenizer(hf_common.sample_texts(8 * steps * batch_size, seed=7)).input_ids for t in row]
    need = steps * batch_size * seq_len
    assert len(ids) >= need, (len(ids), need)
    return torch.tensor(ids[:need]).view(steps, batch_size, seq_len)


def lora_model(path: str, device: str, dtype):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(path, device_map=device, dtype=dtype)
    config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.1, task_type="CAUSAL_LM",
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"])
    torch.manual_seed(0)  # LoRA A matrices are random: same seed, same adapter on every device
    return get_peft_model(base, config)


def train(path: str, device: str, data: torch.Tensor, lr: float = 1e-2, bf16: bool = False):
    model = lora_model(path, device, torch.float32)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr)
    torch.manual_seed(1)  # dropout masks: torch.manual_seed seeds the neuron generators too
    losses = []
    for batch in data:
        batch = batch.to(device)
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    model.eval()
    return model, losses


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="local checkpoint (default: a tiny random Llama)")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--bf16", action="store_true", help="train under torch.autocast(bf16) on both devices")
    p.add_argument("--out", help="where to save the adapter (default: a temp dir)")
    args = p.parse_args(argv)

    from transformers import AutoTokenizer

    path = args.model or hf_common.build_causal_lm(initializer_range=0.02)
    tokenizer = AutoTokenizer.from_pretrained(path)
    data = batches(tokenizer, args.steps, args.batch_size, args.seq_len)

    model, losses = train(path, "neuron", data, bf16=args.bf16)
    _, cpu_losses = train(path, "cpu", data, bf16=args.bf16)
    rtol = 5e-3 if args.bf16 else 1e-5
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, cpu_losses))
    print(f"[lora] neuron losses {['%.5f' % x for x in losses]}")
    print(f"[lora] CPU    losses {['%.5f' % x for x in cpu_losses]}  max rel diff {worst:.2e}")
    assert worst <= rtol, f"LoRA losses differ from CPU: {worst} > {rtol}"
    assert losses[-1] < losses[0], "LoRA training did not reduce the loss"

    # save the adapter from neuron: a standard PEFT adapter directory (safetensors)
    out = args.out or tempfile.mkdtemp(prefix="lora-adapter-")
    model.save_pretrained(out)
    assert os.path.exists(os.path.join(out, "adapter_model.safetensors"))
    probe = data[0, :1]
    with torch.no_grad():
        neuron_logits = model(input_ids=probe.to("neuron")).logits.cpu()

    # reload on a plain CPU install, without the plugin: same logits
    cpu_out = hf_common.run_plain_cpu(f"""
import json
from transformers import AutoModelForCausalLM
from peft import PeftModel
base = AutoModelForCausalLM.from_pretrained({path!r})
model = PeftModel.from_pretrained(base, {out!r}).eval()
probe = torch.tensor({probe.tolist()})
with torch.no_grad():
    logits = model(input_ids=probe).logits
    merged = model.merge_and_unload()(input_ids=probe).logits
print(json.dumps({{"logits": logits.tolist(), "merged": merged.tolist()}}))
""")
    reloaded = json.loads(cpu_out.strip().splitlines()[-1])
    d_reload = hf_common.max_abs_diff(torch.tensor(reloaded["logits"]), neuron_logits)
    d_merged = hf_common.max_abs_diff(torch.tensor(reloaded["merged"]), neuron_logits)
    print(f"[lora] adapter saved on neuron -> {out}; reloaded on plain CPU: logits max|diff| {d_reload:.2e} "
          f"(merged {d_merged:.2e})")
    assert d_reload <= 1e-4 and d_merged <= 1e-4, (d_reload, d_merged)
    return dict(losses=losses, cpu_losses=cpu_losses, max_rel_diff=worst, adapter_dir=out,
                reload_diff=d_reload, merged_diff=d_merged)


if __name__ == "__main__":
    main()
