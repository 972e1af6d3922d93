"""Small builders shared by tests: tiny random-weight models from configs (no hub)."""

from __future__ import annotations

import os
import subprocess
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_llama_config(**overrides):
    from transformers import LlamaConfig
    cfg = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=512, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    cfg.update(overrides)
    return LlamaConfig(**cfg)


def tiny_llama(seed: int = 0, **overrides):
    from transformers import LlamaForCausalLM
    torch.manual_seed(seed)
    return LlamaForCausalLM(tiny_llama_config(**overrides)).eval()


# The instance the tests are written for (64 cores at LNC=2), whatever the host: conftest.py sets it for the
# session and its subprocesses; `discover` gives it to topologies built from an explicit environment. The
# host-chosen default (torch_neuronx.runtime.default_instance) has tests of its own.
TEST_INSTANCE = "trn2.48xlarge"


def discover(env: dict):
    """torch_neuronx.runtime.discover(env) on TEST_INSTANCE unless `env` names another instance."""
    from torch_neuronx.runtime import discover as discover_topology
    return discover_topology({"TORCHNEURON_INSTANCE": TEST_INSTANCE, **env})


def run_python(code: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter (a new process sees a fresh environment and runtime)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env,
                          timeout=timeout, cwd=ROOT)
