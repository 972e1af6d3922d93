"""Transformers inference on neuron, unmodified: from_pretrained(device_map="neuron"), generate() with the static
cache, eager and compiled, and device_map="auto" — each checked token for token against CPU.

    python examples/hf_inference.py                  # eager + device_map="auto" (+ compiled when available)
    python examples/hf_inference.py --compile        # require the compiled run (torch.compile backend "neuron")
    python examples/hf_inference.py --model PATH     # any local causal-LM checkpoint instead of the tiny one

The only Neuron-specific thing in the user code below is the device string.

Reference semantics: eager attention on neuron makes PyTorch's own SDPA kernel choice, as on CPU, and runs
the host's kernel (the fused flash kernel where it applies): eager logits and tokens must be bit-identical to CPU.
A compiled graph may compute attention with the math formulation instead (bf16 rounding differs in the last bit):
the compiled run must equal the CPU run with the fused kernel (PyTorch's default) or with the math one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_common  # noqa: E402  (sets HF_HUB_OFFLINE, imports torch -> plugin)
import torch  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

PROMPTS = ["the neuron core runs matrix", "collective communication joins"]


def neuron_compile_available() -> bool:
    return "neuron" in torch._dynamo.list_backends()


def _inputs(tokenizer, device):
    tokenizer.padding_side = "left"  # decoder-only generation pads on the left
    return tokenizer(PROMPTS, return_tensors="pt", padding=True).to(device)


def cpu_reference(path: str, max_new_tokens: int, dtype=torch.bfloat16, math_sdpa: bool = False):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    batch = _inputs(tok, "cpu")
    backends = [SDPBackend.MATH] if math_sdpa else [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]
    with torch.no_grad(), sdpa_kernel(backends):
        logits = model(**batch).logits
        tokens = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False,
                                cache_implementation="static")
    return logits, tokens


def run_neuron(path: str, max_new_tokens: int, device_map="neuron", compiled: bool = False, dtype=torch.bfloat16):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, device_map=device_map, dtype=dtype)
    batch = _inputs(tok, model.device)
    with torch.no_grad():
        logits = model(**batch).logits
        # On neuron, generate() compiles the decoding step by itself when the cache is static (Transformers picks
        # backend="neuron", dynamic=False); disable_compile=True keeps it eager.
        tokens = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False,
                                cache_implementation="static", disable_compile=not compiled)
    return model, logits, tokens


def check(name, ref_logits, ref_tokens, logits, tokens, atol, alt_tokens=None):
    diff = hf_common.max_abs_diff(ref_logits, logits)
    assert diff <= atol, f"{name}: logits differ from CPU by {diff} > {atol}"
    same = torch.equal(ref_tokens, tokens.cpu()) or (alt_tokens is not None and torch.equal(alt_tokens, tokens.cpu()))
    assert same, f"{name}: greedy tokens differ from CPU\n{ref_tokens}\n{tokens}"
    print(f"[{name}] logits max|diff| vs CPU {diff:.2e}; {tokens.shape[1]} tokens identical to CPU")
    return diff


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="local checkpoint directory (default: build a tiny random Llama)")
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--compile", action="store_true", help="fail if the compiled run is not available")
    p.add_argument("--no-compile", action="store_true", help="skip the compiled run")
    p.add_argument("--no-auto", action="store_true", help="skip device_map='auto'")
    p.add_argument("--auto-only", action="store_true", help=argparse.SUPPRESS)  # step 3 in a one-core process
    args = p.parse_args(argv)

    print(f"HF_DEACTIVATE_ASYNC_LOAD={os.environ.get('HF_DEACTIVATE_ASYNC_LOAD')} (set by the plugin unless you did)")
    path = args.model or hf_common.build_causal_lm()
    ref_logits, ref_tokens = cpu_reference(path, args.max_new_tokens)
    atol = 3e-2 * max(1.0, ref_logits.abs().max().item())  # bf16 logits: a few ulps
    results = {}

    # 1. eager, device_map="neuron" (the one-core process of step 3 runs step 3 only)
    if args.auto_only:
        args.no_compile = True
    else:
        model, logits, tokens = run_neuron(path, args.max_new_tokens)
        assert all(p.device == torch.device("neuron:0") for p in model.parameters())
        results["eager"] = check("eager device_map='neuron'", ref_logits, ref_tokens, logits, tokens, atol)

    # 2. compiled: generate() auto-compiles the forward on neuron with a static cache
    if args.no_compile:
        pass
    elif neuron_compile_available():
        model, logits, tokens = run_neuron(path, args.max_new_tokens, compiled=True)
        assert hasattr(model, "_compiled_call"), "generate() did not take its compiled path"
        cfg = model._last_compile_config
        assert cfg.backend == "neuron", cfg
        _, math_tokens = cpu_reference(path, args.max_new_tokens, math_sdpa=True)
        results["compiled"] = check("compiled (backend='neuron')", ref_logits, ref_tokens, logits, tokens, atol,
                                    alt_tokens=math_tokens)
    elif args.compile:
        raise SystemExit("--compile: torch.compile backend 'neuron' is not registered")
    else:
        print("[compiled] skipped: torch.compile backend 'neuron' is not registered in this build")

    # 3. device_map="auto": Accelerate sizes every visible core with torch.neuron.mem_get_info and places the
    # model on neuron. With several cores visible it spreads layers over them (as over GPUs), but TorchNeuron
    # copies between cores only through the host ("Device-to-device copy requires tensors on same Neuron core"),
    # so the spread model cannot run: as on Trainium, run it in a process that sees one core.
    if not args.no_auto:
        if torch.neuron.device_count() > 1:
            # a core no process holds (this one holds the cores it used: a second process asking fails)
            from torch_neuronx.runtime.ownership import held_cores
            held = {h.core for h in held_cores()}
            free = next((i for i in range(torch.neuron.device_count()) if i not in held), None)
            if free is None:
                raise SystemExit("device_map='auto' in a one-core process needs a free NeuronCore; all are held "
                                 "(`torchneuron ls` lists holders): pass --no-auto, or free a core")
            env = dict(os.environ, NEURON_RT_VISIBLE_CORES=str(free))
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--model", path, "--no-compile",
                                "--max-new-tokens", str(args.max_new_tokens), "--auto-only"],
                               env=env, capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"device_map='auto' on one visible core failed:\n{r.stderr[-3000:]}")
            print(r.stdout.strip().splitlines()[-2])
            results["auto"] = json.loads(r.stdout.strip().splitlines()[-1])["auto"]
            results["auto_devices"] = [0]
        else:
            model, logits, tokens = run_neuron(path, args.max_new_tokens, device_map="auto")
            placed = set(getattr(model, "hf_device_map", {}).values())  # absent when one device holds everything
            assert all(isinstance(d, int) for d in placed), f"device_map='auto' left modules off neuron: {placed}"
            assert all(p.device == torch.device("neuron:0") for p in model.parameters()), \
                "device_map='auto' left weights off the visible core"
            results["auto"] = check("device_map='auto'", ref_logits, ref_tokens, logits, tokens, atol)
            results["auto_devices"] = [0]
    if args.auto_only:
        print(json.dumps({"auto": results["auto"]}))
    return results


if __name__ == "__main__":
    main()
