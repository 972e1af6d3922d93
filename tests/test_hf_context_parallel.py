"""Long-sequence training with context parallelism (examples/hf_context_parallel.py): Accelerate's
ParallelismConfig(cp_size=2) splits every sequence over 2 neuron ranks, attention runs as PyTorch's ring attention
(through torch_neuronx/integrations/context_parallel_attention.py), FSDP2 shards the weights over the same ranks, and
a Transformers Llama trains with one CPU process's losses. FSDP 2 x CP 2 and TP 2 x CP 2 (4 ranks) are run by hand
(docs/huggingface.md)."""

import os
import sys

import pytest
import torch

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))

needs_dist = pytest.mark.skipif("neuron" not in torch.distributed.Backend.backend_list,
                                reason="c10d backend 'neuron' not registered yet")


@needs_dist
@pytest.mark.slow
def test_context_parallel_training_matches_cpu():
    import hf_context_parallel
    r = hf_context_parallel.main(["--cp", "2", "--seq", "256", "--steps", "3"])
    assert r["world"] == 2 and r["local_tokens"] == 128  # each rank holds half of every sequence
    assert r["q_local"] == [32, 64] and r["q_global"] == [64, 64] and r["device"].startswith("neuron")  # FSDP2
    assert r["max_relative_diff"] <= 1e-4 and r["losses"][-1] < r["losses"][0], r


def test_ring_attention_of_the_host_kernel_is_registered_with_context_parallelism():
    """Importing torch's context-parallel module installs the plugin's handler of the host flash kernel."""
    from torch_neuronx.integrations import context_parallel_attention as shim
    from torch.distributed.tensor.experimental._context_parallel import _attention as cp  # installs the shim
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    assert cp.custom_ops[op] is shim._handler
    assert cp.custom_ops[torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default] is shim._handler
