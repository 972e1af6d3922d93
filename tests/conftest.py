"""Shared test setup: the plugin is loaded by `import torch` itself (autoload)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

assert hasattr(torch, "neuron"), "torch_neuronx did not autoload on `import torch`: is it installed (scripts/setup.sh)?"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
