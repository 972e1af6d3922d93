"""Ops TorchNeuron runs on the device that have no CPU kernel: linear_backward, the batch_norm_* family of
nn.SyncBatchNorm, softmax with half_to_float, and SDPA's OVERRIDEABLE backend (TorchNeuron's own). Each is
compared with CPU: a reference written from the definitions in float64, or PyTorch's own CPU path.
(nn.SyncBatchNorm under a "neuron" process group: tests/test_distributed_training.py.)
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def test_linear_backward_matches_autograd_on_cpu():
    x, w = torch.randn(2, 5, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    dy = torch.randn(2, 5, 3, dtype=torch.float64)
    xr, wr, br = x.clone().requires_grad_(), w.clone().requires_grad_(), torch.zeros(3, dtype=torch.float64,
                                                                                    requires_grad=True)
    F.linear(xr, wr, br).backward(dy)
    dx, dw, db = torch.ops.aten.linear_backward(x.float().to("neuron"), dy.float().to("neuron"),
                                                w.float().to("neuron"), [True, True, True])
    for got, want in ((dx, xr.grad), (dw, wr.grad), (db, br.grad)):
        assert got.device.type == "neuron" and torch.allclose(got.cpu().double(), want, atol=1e-5)
    only_input = torch.ops.aten.linear_backward(x.float().to("neuron"), dy.float().to("neuron"),
                                                w.float().to("neuron"), [True, False, False])
    assert only_input[1] is None and only_input[2] is None


def _stats(x, eps):
    dims = [0] + list(range(2, x.dim()))
    return x.mean(dims), (x.var(dims, unbiased=False) + eps).rsqrt()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sync_batchnorm_kernels_match_their_definition(dtype):
    torch.manual_seed(0)
    eps, momentum, C = 1e-5, 0.1, 3
    shards = [torch.randn(n, C, 4, dtype=torch.float64) * (i + 1) + i for i, n in enumerate((2, 5))]  # two "ranks"
    whole = torch.cat(shards)
    on = [s.to(dtype).to("neuron") for s in shards]
    stats = [torch.batch_norm_stats(s, eps) for s in on]
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    for (mean, invstd), s in zip(stats, shards):
        want_mean, want_invstd = _stats(s.to(dtype).double(), eps)
        assert mean.dtype == torch.float32  # CUDA's accumulate type for 16-bit inputs
        assert torch.allclose(mean.cpu().double(), want_mean, atol=tol) and \
            torch.allclose(invstd.cpu().double(), want_invstd, rtol=1e-4, atol=tol)
    running_mean, running_var = torch.zeros(C, device="neuron"), torch.ones(C, device="neuron")
    counts = torch.tensor([float(s.shape[0] * s.shape[2]) for s in shards], device="neuron")
    mean, invstd = torch.batch_norm_gather_stats_with_counts(
        on[0], torch.stack([m for m, _ in stats]), torch.stack([v for _, v in stats]), running_mean, running_var,
        momentum, eps, counts)
    want_mean, want_invstd = _stats(whole.to(dtype).double(), eps)
    assert torch.allclose(mean.cpu().double(), want_mean, atol=tol)
    assert torch.allclose(invstd.cpu().double(), want_invstd, rtol=1e-4, atol=tol)
    n = whole.shape[0] * whole.shape[2]
    unbiased = whole.to(dtype).double().var([0, 2], unbiased=True)
    assert torch.allclose(running_mean.cpu().double(), momentum * want_mean, atol=tol)
    assert torch.allclose(running_var.cpu().double(), (1 - momentum) + momentum * unbiased, rtol=1e-4, atol=tol)
    weight, bias = torch.randn(C, dtype=torch.float64), torch.randn(C, dtype=torch.float64)
    y = torch.batch_norm_elemt(on[1], weight.float().to("neuron"), bias.float().to("neuron"), mean, invstd, eps)
    s1 = shards[1].to(dtype).double()
    want = (s1 - want_mean[None, :, None]) * want_invstd[None, :, None] * weight[None, :, None] + bias[None, :, None]
    assert y.dtype == dtype and torch.allclose(y.cpu().double(), want, atol=tol * 10)
    # backward: the sums over the whole batch, then the input gradient of a shard, against autograd in float64
    dys = [torch.randn_like(s) for s in shards]
    xr = whole.clone().requires_grad_()
    wr = weight.clone().requires_grad_()
    out = F.batch_norm(xr, None, None, wr, bias, training=True, eps=eps)
    out.backward(torch.cat(dys))
    reduced = [torch.batch_norm_backward_reduce(dy.to(dtype).to("neuron"), s, mean, invstd,
                                                weight.float().to("neuron"), True, True, True)
               for dy, s in zip(dys, on)]
    # All four sums whatever the flags, as TorchNeuron's kernel returns them (CUDA leaves the unrequested ones
    # undefined; nn.SyncBatchNorm drops them itself).
    flags_off = torch.batch_norm_backward_reduce(dys[0].to(dtype).to("neuron"), on[0], mean, invstd,
                                                 weight.float().to("neuron"), False, False, False)
    assert all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(flags_off, reduced[0]))
    sum_dy = sum(r[0] for r in reduced)
    sum_dy_xmu = sum(r[1] for r in reduced)
    grad_weight = sum(r[2].cpu().double() for r in reduced)
    assert torch.allclose(grad_weight, wr.grad, rtol=1e-3, atol=tol * 10)
    assert torch.allclose(sum(r[3].cpu().double() for r in reduced), torch.cat(dys).sum([0, 2]), atol=tol * 10)
    count = torch.tensor([s.shape[0] * s.shape[2] for s in shards], dtype=torch.int32, device="neuron")
    dx = torch.batch_norm_backward_elemt(dys[1].to(dtype).to("neuron"), on[1], mean, invstd,
                                         weight.float().to("neuron"), sum_dy, sum_dy_xmu, count)
    assert dx.dtype == dtype and torch.allclose(dx.cpu().double(), xr.grad[shards[0].shape[0]:], atol=tol * 10)


def test_softmax_half_to_float_as_on_cuda():
    x = torch.randn(4, 7, dtype=torch.float16)
    for op, ref in ((torch._softmax, torch.softmax), (torch._log_softmax, torch.log_softmax)):
        xn = x.to("neuron").requires_grad_()
        y = op(xn, 1, True)
        assert y.dtype == torch.float32 and torch.allclose(y.cpu(), ref(x.float(), 1), atol=1e-6)
        g = torch.randn(4, 7)
        y.backward(g.to("neuron"))
        xr = x.float().requires_grad_()
        ref(xr, 1).backward(g)
        assert xn.grad.dtype == torch.float16 and torch.allclose(xn.grad.cpu().float(), xr.grad, atol=1e-3)
    with pytest.raises(RuntimeError, match="conversion is supported for Half type only"):
        torch._softmax(torch.randn(2, 3, device="neuron"), 1, True)


def _attention(q, k, v, mask=None, causal=False, scale=None, dropout_keep=None):
    """Scaled dot product attention from its definition (float64 on CPU); dropout_keep: the kept entries, scaled."""
    k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
    v = v.repeat_interleave(q.shape[1] // v.shape[1], 1)
    s = q @ k.transpose(-2, -1) * (scale or 1 / math.sqrt(q.shape[-1]))
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    p = s.softmax(-1)
    return (p if dropout_keep is None else p * dropout_keep) @ v


@pytest.mark.parametrize("case", ["plain", "causal", "bool mask", "float bias", "gqa", "bfloat16"])
def test_sdpa_overrideable_matches_cpu(case):
    torch.manual_seed(0)
    dtype = torch.bfloat16 if case == "bfloat16" else torch.float32
    q = torch.randn(2, 4, 6, 8, dtype=torch.float64)
    kv_heads = 2 if case == "gqa" else 4
    k, v = torch.randn(2, kv_heads, 5, 8, dtype=torch.float64), torch.randn(2, kv_heads, 5, 8, dtype=torch.float64)
    mask = {"bool mask": torch.rand(6, 5) > 0.3, "float bias": torch.randn(2, 1, 6, 5, dtype=torch.float64)}.get(case)
    if mask is not None and mask.dtype == torch.bool:
        mask[:, 0] = True  # no row fully masked
    causal = case == "causal"
    ins = [t.to(dtype).to("neuron").requires_grad_() for t in (q, k, v)]
    m = None if mask is None else (mask if mask.dtype == torch.bool else mask.to(dtype)).to("neuron")
    with sdpa_kernel(SDPBackend.OVERRIDEABLE):
        out = F.scaled_dot_product_attention(*ins, attn_mask=m, is_causal=causal, enable_gqa=case == "gqa")
    assert out.grad_fn.name() == "ScaledDotProductFusedAttentionOverrideableBackward0"
    refs = [t.to(dtype).double().requires_grad_() for t in (q, k, v)]
    want = _attention(*refs, mask=mask, causal=causal)
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    assert out.dtype == dtype and torch.allclose(out.cpu().double(), want, atol=tol)
    dy = torch.randn_like(want)
    out.backward(dy.to(dtype).to("neuron"))
    want.backward(dy)
    for got, ref in zip(ins, refs):
        assert torch.allclose(got.grad.cpu().double(), ref.grad, atol=tol * 3), case


def test_sdpa_overrideable_with_dropout_and_a_bias_gradient():
    """Dropout draws its mask from a seed the op returns (kept for backward): the reference rebuilds it."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    bias = torch.randn(1, 2, 4, 4)
    ins = [t.to("neuron") for t in (q, k, v, bias)]
    p = 0.3
    out, lse, _, _, _, _, seed, offset, _ = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        *ins, p, False, False)
    keep = torch.empty(1, 2, 4, 4).bernoulli_(1 - p, generator=torch.Generator().manual_seed(int(seed)))
    refs = [t.double().requires_grad_() for t in (q, k, v, bias)]
    want = _attention(*refs[:3], mask=refs[3], dropout_keep=keep.double() / (1 - p))
    assert torch.allclose(out.cpu().double(), want, atol=1e-5)
    dy = torch.randn(1, 2, 4, 8)
    grads = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward(
        dy.to("neuron"), *ins, [True, True, True, True], out, lse, None, None, 4, 4, p, False, seed, offset)
    want.backward(dy.double())
    for got, ref in zip(grads, refs):
        assert torch.allclose(got.cpu().double(), ref.grad, atol=1e-4)
    torch.manual_seed(5)  # the same seed gives the same mask
    a = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(*ins, p, False, False)[0]
    torch.manual_seed(5)
    b = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(*ins, p, False, False)[0]
    assert torch.equal(a.cpu(), b.cpu())


def test_sdpa_default_backend_stays_the_cpu_choice():
    q = torch.randn(1, 2, 4, 8, device="neuron", requires_grad=True)
    out = F.scaled_dot_product_attention(q, q, q)
    assert "Overrideable" not in out.grad_fn.name()  # the CPU's fused flash kernel: CPU's numbers, bit for bit
    assert torch.equal(out.detach().cpu(), F.scaled_dot_product_attention(*(q.detach().cpu(),) * 3))


@pytest.mark.parametrize("dtype,weight_dtype", [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16),
                                                (torch.bfloat16, torch.float32), (torch.float16, torch.float32)])
def test_rms_norm_and_its_fused_backward_match_cpu(dtype, weight_dtype):
    """rms_norm takes the fused form on neuron (a 16-bit input with a float32 weight computed in float32, as
    TorchNeuron does), and its backward is _fused_rms_norm_backward, which the CPU has no kernel for."""
    torch.manual_seed(0)
    x, w, dy = torch.randn(3, 4, 8, dtype=dtype), torch.randn(4, 8, dtype=weight_dtype), torch.randn(3, 4, 8, dtype=dtype)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    want = F.rms_norm(xc, (4, 8), wc, 1e-5)
    want.backward(dy)
    xn, wn = x.to("neuron").requires_grad_(), w.to("neuron").requires_grad_()
    got = F.rms_norm(xn, (4, 8), wn, 1e-5)
    assert got.dtype == want.dtype and got.grad_fn is not None
    got.backward(dy.to("neuron"))
    tol = {"atol": 1e-5, "rtol": 1.3e-6} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    torch.testing.assert_close(got.cpu(), want.detach(), **tol)
    torch.testing.assert_close(xn.grad.cpu(), xc.grad, **tol)
    torch.testing.assert_close(wn.grad.cpu(), wc.grad, **tol)
    # the backward kernel itself, without a weight and with one gradient requested
    xf = x.float()
    rstd = (xf.pow(2).mean((-2, -1), keepdim=True) + 1e-5).rsqrt()
    dx, dw = torch.ops.aten._fused_rms_norm_backward(dy.to("neuron"), x.to("neuron"), [4, 8], rstd.to("neuron"),
                                                     None, [True, False])
    xr = x.double().requires_grad_()
    F.rms_norm(xr, (4, 8), None, 1e-5).backward(dy.double())
    assert dw is None and dx.dtype == dtype
    torch.testing.assert_close(dx.cpu().double(), xr.grad, **({"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32
                                                               else {"atol": 3e-2, "rtol": 3e-2}))
