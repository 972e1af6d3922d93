"""Main demo: train a tiny Llama for a few steps on `neuron` and on CPU, side by side.

The model is built from a config with random weights (no model hub). The same
seed, data and optimizer run on both devices; the losses should agree to
float32 precision.

    python examples/train_demo.py [--steps 8]
"""

import argparse
import copy
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    args = ap.parse_args()

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    cpu_model = LlamaForCausalLM(cfg)
    neuron_model = copy.deepcopy(cpu_model).to("neuron")
    opt_cpu = torch.optim.AdamW(cpu_model.parameters(), lr=1e-3)
    opt_neuron = torch.optim.AdamW(neuron_model.parameters(), lr=1e-3)
    data = torch.randint(0, cfg.vocab_size, (args.steps, 4, args.seq))

    props = torch.neuron.get_device_properties(0)
    print(f"device neuron:0 = {props.name} on emulated {props.instance_type}, "
          f"{props.total_memory / 2**30:.0f} GiB HBM per core")
    print(f"{'step':>4} {'loss (cpu)':>12} {'loss (neuron)':>14} {'|diff|':>10}")
    t_cpu = t_neuron = 0.0
    for step in range(args.steps):
        batch = data[step]
        t0 = time.perf_counter()
        loss_c = cpu_model(batch, labels=batch).loss
        loss_c.backward()
        opt_cpu.step()
        opt_cpu.zero_grad()
        t1 = time.perf_counter()
        nb = batch.to("neuron")
        loss_n = neuron_model(nb, labels=nb).loss
        loss_n.backward()
        opt_neuron.step()
        opt_neuron.zero_grad()
        ln = loss_n.item()
        t2 = time.perf_counter()
        t_cpu += t1 - t0
        t_neuron += t2 - t1
        print(f"{step:>4} {loss_c.item():>12.6f} {ln:>14.6f} {abs(loss_c.item() - ln):>10.2e}")
    print(f"neuron memory: {torch.neuron.memory_allocated() / 2**20:.1f} MiB allocated, "
          f"peak {torch.neuron.max_memory_allocated() / 2**20:.1f} MiB")
    print(f"time: cpu {t_cpu:.2f}s, neuron (emulated) {t_neuron:.2f}s")
    if abs(loss_c.item() - ln) > 1e-3:
        raise SystemExit("losses diverged between CPU and neuron")


if __name__ == "__main__":
    main()
