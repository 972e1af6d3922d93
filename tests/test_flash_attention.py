"""CUDA's flash-attention op with its log-sum-exp, aten::_scaled_dot_product_flash_attention, on neuron
(csrc/aten/native/FlashAttention.cpp): what Diffusers' ring attention merges (its `_native_flash` backend). Computed by
the host's flash kernel, so it equals CPU's `_scaled_dot_product_flash_attention_for_cpu` bit for bit, forward and
backward, eager and compiled (compile/host_graph.py puts the same op into compiled graphs)."""

import pytest
import torch

aten = torch.ops.aten


def _qkv(dtype, seed=0, heads=4, q_len=8, k_len=8, dim=16):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2, heads, n, dim, generator=g).to(dtype) for n in (q_len, k_len, k_len)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal,scale", [(False, None), (True, 0.3)])
def test_forward_and_backward_equal_the_host_kernel(dtype, causal, scale):
    q, k, v = (t.requires_grad_() for t in _qkv(dtype))
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=scale)
    grad = torch.randn_like(out)
    out.backward(grad)

    qn, kn, vn = (t.detach().to("neuron").requires_grad_() for t in (q, k, v))
    result = aten._scaled_dot_product_flash_attention(qn, kn, vn, 0.0, causal, False, scale=scale)
    out_n, lse_n, cum_q, cum_k, max_q, max_k = result[:6]
    assert out_n.device.type == "neuron" and lse_n.dtype == torch.float32 and lse_n.shape == (2, 4, 8)
    assert cum_q is None and cum_k is None and (max_q, max_k) == (8, 8)  # dense inputs, as CUDA returns them
    assert torch.equal(out_n.cpu(), out) and torch.equal(lse_n.cpu(), lse)
    out_n.backward(grad.to("neuron"))  # autograd: the op's derivative, through its backward on neuron
    for a, b in zip((qn, kn, vn), (q, k, v)):
        assert torch.equal(a.grad.cpu(), b.grad)


def test_keys_longer_than_queries():
    q, k, v = _qkv(torch.float32, q_len=4, k_len=12)
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
    out_n, lse_n = aten._scaled_dot_product_flash_attention(*(t.to("neuron") for t in (q, k, v)))[:2]
    assert torch.equal(out_n.cpu(), out) and torch.equal(lse_n.cpu(), lse)


def test_bad_arguments_name_the_problem():
    q, k, v = (t.to("neuron") for t in _qkv(torch.float32))
    with pytest.raises(RuntimeError, match="return_debug_mask=True is not supported"):
        aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False, True)
    with pytest.raises(RuntimeError, match=r"query must be \[batch, heads, sequence, head_dim\]"):
        aten._scaled_dot_product_flash_attention(q[0], k, v)


def test_compiled_forward_and_backward_equal_eager():
    def attend(q, k, v):
        out, lse = aten._scaled_dot_product_flash_attention(q, k, v, 0.0, True)[:2]
        return out * lse.unsqueeze(-1).exp()

    q, k, v = (t.to("neuron").requires_grad_() for t in _qkv(torch.float32, seed=1))
    eager = attend(q, k, v)
    eager.sum().backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    compiled = torch.compile(attend, backend="neuron", dynamic=False)(q, k, v)
    compiled.sum().backward()
    assert compiled.device.type == "neuron"
    torch.testing.assert_close(compiled.cpu(), eager.cpu(), rtol=1e-5, atol=1e-6)
    for t, g in zip((q, k, v), grads):
        torch.testing.assert_close(t.grad.cpu(), g.cpu(), rtol=1e-5, atol=1e-6)
