"""Transformers inference on neuron (examples/hf_inference.py): from_pretrained(device_map="neuron"|"auto"),
generate() with a static cache, eager and compiled, token for token equal to CPU; HF_DEACTIVATE_ASYNC_LOAD."""

import os
import sys

import pytest
import torch

from helpers import ROOT, run_python

sys.path.insert(0, os.path.join(ROOT, "examples"))
import hf_common  # noqa: E402
import hf_inference  # noqa: E402

NEW_TOKENS = 12


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return hf_common.build_causal_lm(str(tmp_path_factory.mktemp("tiny-llama")))


@pytest.fixture(scope="module")
def reference(tiny_path):
    return hf_inference.cpu_reference(tiny_path, NEW_TOKENS)


def test_from_pretrained_device_map_neuron_bf16_generate_static_cache_eager(tiny_path, reference):
    ref_logits, ref_tokens = reference
    model, logits, tokens = hf_inference.run_neuron(tiny_path, NEW_TOKENS)
    assert model.dtype == torch.bfloat16
    assert {p.device for p in model.parameters()} == {torch.device("neuron:0")}
    assert tokens.device.type == "neuron"
    assert not hasattr(model, "_compiled_call")  # disable_compile=True kept it eager
    assert hf_common.max_abs_diff(ref_logits, logits) == 0.0  # same host math, same rounding
    assert torch.equal(tokens.cpu(), ref_tokens)
    assert ref_tokens.shape[1] > NEW_TOKENS  # prompt + new tokens (no early EOS hiding a mismatch)


@pytest.mark.skipif(not hf_inference.neuron_compile_available(),
                    reason="torch.compile backend 'neuron' not registered yet")
def test_generate_static_cache_compiled_with_neuron_backend(tiny_path, reference):
    from torch._dynamo.utils import counters
    ref_logits, ref_tokens = reference
    graphs_before = counters["stats"]["unique_graphs"]
    model, logits, tokens = hf_inference.run_neuron(tiny_path, NEW_TOKENS, compiled=True)
    assert counters["stats"]["unique_graphs"] > graphs_before, "no graph was compiled"
    assert hasattr(model, "_compiled_call"), "generate() did not compile on neuron"
    assert model._last_compile_config.backend == "neuron"
    assert model._last_compile_config.dynamic is False
    assert hf_common.max_abs_diff(ref_logits, logits) < 5e-2
    # the compiled graph may use the host's fused attention kernel (as eager code does) or the math one
    _, math_tokens = hf_inference.cpu_reference(tiny_path, NEW_TOKENS, math_sdpa=True)
    assert torch.equal(tokens.cpu(), ref_tokens) or torch.equal(tokens.cpu(), math_tokens)


def test_device_map_auto_places_model_on_neuron(tiny_path, reference):
    """Accelerate sizes the visible cores with mem_get_info and places every module on neuron (none on CPU). With
    several cores visible it spreads the layers over them, and the spread model stops at the first copy between
    cores, as on TorchNeuron (its copy kernel requires one core); the example then runs "auto" where Trainium can,
    in a process that sees one core, token for token as CPU."""
    free, total = torch.neuron.mem_get_info()
    assert 0 < free <= total
    assert torch.neuron.device_count() > 1
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(tiny_path, device_map="auto", dtype=torch.bfloat16)
    placed = set(model.hf_device_map.values())
    assert placed and all(isinstance(d, int) for d in placed) and len(placed) > 1, placed
    assert all(p.device.type == "neuron" for p in model.parameters())
    with pytest.raises(RuntimeError, match="same Neuron core.*Copy through the host"):
        with torch.no_grad():
            model(torch.tensor([[1, 2, 3]], device="neuron:0"))
    results = hf_inference.main(["--model", tiny_path, "--no-compile", "--max-new-tokens", str(NEW_TOKENS)])
    assert results["auto_devices"] == [0]
    assert results["auto"] <= 3e-2 * max(1.0, reference[0].abs().max().item())


def test_async_load_deactivated_by_plugin_and_loading_just_works_single_core():
    """Fresh process, HF_DEACTIVATE_ASYNC_LOAD unset: the plugin sets it to 1 at `import torch`; loading with
    device_map="auto" on one visible core puts everything on neuron:0."""
    env = {k: v for k, v in os.environ.items() if k != "HF_DEACTIVATE_ASYNC_LOAD"}
    env["NEURON_RT_VISIBLE_CORES"] = "0"
    code = f"""
import os, sys
sys.path.insert(0, {os.path.join(ROOT, 'examples')!r})
import torch
assert os.environ["HF_DEACTIVATE_ASYNC_LOAD"] == "1", os.environ.get("HF_DEACTIVATE_ASYNC_LOAD")
import hf_common
from transformers import AutoModelForCausalLM
path = hf_common.build_causal_lm()
m = AutoModelForCausalLM.from_pretrained(path, device_map="auto", dtype=torch.bfloat16)
print(sorted({{str(p.device) for p in m.parameters()}}))
"""
    import subprocess
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "['neuron:0']"


def test_user_value_of_hf_deactivate_async_load_wins():
    r = run_python("import os, torch; print(os.environ['HF_DEACTIVATE_ASYNC_LOAD'])",
                   env={"HF_DEACTIVATE_ASYNC_LOAD": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"


def test_continuous_batching_generate_batch_equals_cpu(tiny_path):
    """`generate_batch` (Transformers' continuous batching, paged cache) on neuron: tokens equal to CPU's.
    Its cache is given a size (num_blocks): left to size itself, Transformers 5.23 takes 90% of the host's
    RAM on devices it does not know (docs/huggingface.md)."""
    from transformers import AutoModelForCausalLM, GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    prompts = [[1, 2, 3, 4, 5], [7, 8, 9]]
    gen = GenerationConfig(max_new_tokens=8, do_sample=False, eos_token_id=-1, pad_token_id=0)
    outputs = {}
    for device in ("cpu", "neuron"):
        model = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32).eval().to(device)
        out = model.generate_batch(inputs=prompts, generation_config=gen,
                                   continuous_batching_config=ContinuousBatchingConfig(num_blocks=16, max_batch_tokens=64))
        outputs[device] = {k: v.generated_tokens for k, v in out.items()}
    assert len(outputs["cpu"]) == 2 and all(len(t) == 8 for t in outputs["cpu"].values())
    assert outputs["neuron"] == outputs["cpu"]
