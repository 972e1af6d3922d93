"""Flash attention as NKI kernels (examples/nki_flash_attention.py: online softmax over tiles, causal mask, GQA),
forward and backward against PyTorch's SDPA, and trained inside a tiny Transformers Llama through
torch_neuronx.nki_op with register_autograd: eager and torch.compile(backend="neuron", fullgraph=True) losses equal
the CPU run with SDPA.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch
import torch.nn.functional as F

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))
import nki_flash_attention as fa  # noqa: E402
import torch_neuronx.nki as tnki  # noqa: E402

DEV = "neuron"


@pytest.mark.parametrize("B,H,KVH,S,D,causal", [(1, 2, 1, 256, 16, True), (2, 4, 2, 128, 32, False),
                                               (1, 1, 1, 640, 64, True)])
def test_flash_attention_forward_backward_match_sdpa(B, H, KVH, S, D, causal):
    q, k, v = torch.randn(B, H, S, D), torch.randn(B, KVH, S, D), torch.randn(B, KVH, S, D)
    scale = D ** -0.5
    qr, kr, vr = (t.clone().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal, scale=scale, enable_gqa=True)
    qs, ks, vs = (t.to(DEV).requires_grad_() for t in (q, k, v))
    out, lse = fa.flash_attention(qs, ks, vs, scale, causal)
    torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-5, atol=1e-5)
    scores = (q @ k.repeat_interleave(H // KVH, 1).transpose(-1, -2)) * scale
    if causal:
        scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(lse.cpu().squeeze(-1), torch.logsumexp(scores, -1), rtol=1e-5, atol=1e-5)
    do = torch.randn_like(ref)
    ref.backward(do)
    out.backward(do.to(DEV))
    for got, want in ((qs.grad, qr.grad), (ks.grad, kr.grad), (vs.grad, vr.grad)):
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def cpu_losses():
    return fa.train_losses("cpu", "sdpa")


def _kernel_calls() -> tuple:
    stats = tnki.statistics()
    return tuple(stats[k].calls if k in stats else 0 for k in ("flash_attention_fwd", "flash_attention_bwd"))


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "compiled"])
def test_llama_trains_with_nki_flash_attention(cpu_losses, compile):
    fa.register_attention()
    before = _kernel_calls()
    got = fa.train_losses(DEV, fa.ATTN_IMPLEMENTATION, compile=compile)
    assert got == pytest.approx(cpu_losses, rel=1e-4)
    fwd, bwd = (a - b for a, b in zip(_kernel_calls(), before))
    assert fwd == bwd == 3 * 2   # 3 steps x 2 layers: the kernels ran (compiled: inside the graph)
