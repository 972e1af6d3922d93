"""Elementwise ops that run the host's compute kernels directly on device memory (csrc/aten/native/HostKernels.h):
same results as CPU bit for bit, CUDA's errors, no trip through the boxed fallback unless dtypes mix. Also the
frequent ops with a dedicated path short of the fallback: zero_ (Zero.cpp), sum/mean over dims and cat
(HostAliasOps.cpp)."""

import pytest
import torch

import torch_neuronx

BINARY = {
    "add": lambda a, b: a + b,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=-2),
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}
UNARY = ["neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sigmoid", "tanh"]


def pair(dtype, shape_a=(4, 33), shape_b=(33,)):
    g = torch.Generator().manual_seed(0)
    a = torch.rand(shape_a, generator=g).add(0.5).to(dtype)
    b = torch.rand(shape_b, generator=g).add(0.5).to(dtype)
    return a, b


def fallback_calls():
    return sum(torch_neuronx.get_emulator_op_counts().values())


# (true division of integers promotes to float: test_mixed_dtypes_promote_like_cpu covers it)
@pytest.mark.parametrize("name,dtype", [(n, d) for n in sorted(BINARY)
                                        for d in (torch.float32, torch.bfloat16, torch.float16, torch.int32)
                                        if not (n == "div" and d == torch.int32)])
def test_binary_functional_and_inplace_match_cpu_without_fallback(name, dtype):
    a, b = pair(dtype) if dtype.is_floating_point else (x.mul(10) for x in pair(torch.float32))
    if not dtype.is_floating_point:
        a, b = a.to(dtype), b.to(dtype)
    f = BINARY[name]
    torch_neuronx.clear_op_tracking()
    out = f(a.neuron(), b.neuron())
    assert fallback_calls() == 0, torch_neuronx.get_emulator_op_counts()
    assert out.device == torch.device("neuron:0") and out.dtype == f(a, b).dtype
    assert torch.equal(out.cpu(), f(a, b))
    if name in ("add", "sub", "mul", "div"):
        x = a.clone().neuron()
        getattr(x, name + "_")(b.neuron())
        ref = a.clone()
        getattr(ref, name + "_")(b)
        assert torch.equal(x.cpu(), ref)


@pytest.mark.parametrize("name", UNARY + ["silu", "pow"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unary_functional_and_inplace_match_cpu(name, dtype):
    a = pair(dtype)[0]
    if name == "silu":
        f, f_ = torch.nn.functional.silu, (lambda t: torch.nn.functional.silu(t, inplace=True))
    elif name == "pow":
        f, f_ = (lambda t: t.pow(3)), (lambda t: t.pow_(3))
    else:
        f, f_ = getattr(torch, name), (lambda t: getattr(t, name + "_")())
    torch_neuronx.clear_op_tracking()
    d = a.neuron()
    assert torch.equal(f(d).cpu(), f(a))
    x = d.clone()
    assert f_(x) is x
    assert fallback_calls() == 0, torch_neuronx.get_emulator_op_counts()
    assert torch.equal(x.cpu(), f_(a.clone()))


def test_python_numbers_noncontiguous_broadcast_and_zero_size():
    a, b = pair(torch.float32, (6, 8), (8,))
    d, e = a.neuron(), b.neuron()
    for f in [lambda x, y: x * 2.5, lambda x, y: 3 - x, lambda x, y: x / 7, lambda x, y: x + True,
              lambda x, y: x.t() * y[:6], lambda x, y: x[:, ::2] + y[::2], lambda x, y: x[:0] * y,
              lambda x, y: x.expand(2, 6, 8) - y, lambda x, y: x.long() * 3, lambda x, y: x.to(torch.complex64) * 2]:
        assert torch.equal(f(d, e).cpu(), f(a, b))
    # bf16 with a Python number: CPU reads the number at full precision; so does neuron
    h = a.bfloat16()
    assert torch.equal((h.neuron() * 0.1).cpu(), h * 0.1)
    assert torch.equal((h.neuron() + 1e-3).cpu(), h + 1e-3)


def test_mixed_dtypes_promote_like_cpu():
    from torch_neuronx import dtypes
    a, b = pair(torch.float32)
    dtypes.set_fp64_mode("exact")  # promotion to float64 compared bit for bit (Neuron's fp64 rule aside)
    try:
        for x, y in [(a.bfloat16(), b), (a, b.double()), (a.int(), b), (a.mul(9).int(), b.mul(9).long())]:
            for f in BINARY.values():
                assert torch.equal(f(x.neuron(), y.neuron()).cpu(), f(x, y))
    finally:
        dtypes.set_fp64_mode(dtypes.DEFAULT_FP64)
    assert torch.equal(torch.exp(a.mul(5).int().neuron()).cpu(), torch.exp(a.mul(5).int()))


def test_mm_shape_errors_as_torchneuron_words_them():
    a, b = torch.randn(3, 4, device="neuron"), torch.randn(5, 6, device="neuron")
    with pytest.raises(RuntimeError, match=r"a and b must have same reduction dim, but got \[3, 4\] X \[5, 6\]"):
        torch.mm(a, b)
    with pytest.raises(RuntimeError, match="a must be 2D and b must be 2D, got 3-D and 2-D"):
        torch.mm(torch.randn(2, 3, 4, device="neuron"), b)
    strided = b[:4].T.contiguous().T
    assert torch.equal(torch.mm(a, strided).cpu(), torch.mm(a.cpu(), strided.cpu()))


def test_errors_are_cudas():
    a, b = pair(torch.float32)
    # CUDA's message, which also names the CPU argument as TorchNeuron does; a 0-dim CPU tensor mixes in
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*neuron:0 and cpu.*"
                                           "Non-scalar tensor arg1 is on cpu device, expected neuron"):
        a.neuron() + b.expand(4, 33).contiguous()
    with pytest.raises(RuntimeError, match="Non-scalar tensor arg1 is on cpu device, expected neuron"):
        a.neuron().mul_(b.expand(4, 33).contiguous())
    assert torch.equal((a.neuron() * torch.tensor(2.0)).cpu(), a * 2)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*neuron:0 and neuron:1"):
        a.neuron() + b.to("neuron:1")
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        a.long().neuron().add_(1.5)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        b.neuron().add_(a.neuron())
    # a CPU scalar tensor is allowed next to device tensors, as with CUDA
    assert torch.equal((a.neuron() * torch.tensor(3.0)).cpu(), a * 3)


def test_outputs_live_on_the_operands_core_and_are_counted():
    a, b = pair(torch.float32)
    with torch.neuron.device(0):
        x, y = a.to("neuron:2"), b.to("neuron:2")
        before = torch.neuron.memory_allocated(2)
        out = x * y
        assert out.device == torch.device("neuron:2")
        assert torch.neuron.memory_allocated(2) == before + out.untyped_storage().nbytes()
    del out
    assert torch.neuron.memory_allocated(2) == before


def test_autograd_through_direct_kernels():
    a, b = pair(torch.float32)
    xs = [a.clone().requires_grad_(), a.clone().neuron().requires_grad_()]
    for x, other in zip(xs, [b, b.neuron()]):
        (torch.sigmoid(x * other - 1) / (x + 2)).exp().sum().backward()
    assert torch.equal(xs[1].grad.cpu(), xs[0].grad)


def test_fp64_error_mode_still_applies(monkeypatch):
    from torch_neuronx import dtypes
    d = torch.ones(3, dtype=torch.float64, device="neuron")
    dtypes.set_fp64_mode("error")
    try:
        with pytest.raises(RuntimeError, match="TORCHNEURON_FP64=error"):
            d + d
    finally:
        dtypes.set_fp64_mode(dtypes.DEFAULT_FP64)
    assert torch.equal((d + d).cpu(), torch.full((3,), 2.0, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_zero_sum_mean_cat_match_cpu_without_fallback(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 10, 7, generator=g).mul(3).to(dtype)
    cases = {
        "sum": lambda t: t.sum(-1), "sum_keepdim": lambda t: t.sum((0, 2), keepdim=True), "sum_all": lambda t: t.sum(),
        "sum_strided": lambda t: t.transpose(0, 2).sum(1), "mean": lambda t: t.mean(-1, keepdim=True),
        "mean_all": lambda t: t.mean((0, 1, 2)), "cat": lambda t: torch.cat([t, t[:, :3], -t], 1),
        "cat_strided": lambda t: torch.cat([t.transpose(1, 2), t[:, :7].transpose(1, 2)], -1),
        "cat_empty": lambda t: torch.cat([t[:0], t], 0), "zeros": lambda t: torch.zeros_like(t),
        "zero_": lambda t: t.clone().zero_(), "zero_permuted": lambda t: t.clone().transpose(0, 1).zero_(),
    }
    for name, f in cases.items():
        torch_neuronx.clear_op_tracking()
        out = f(x.neuron())
        assert fallback_calls() == 0, (name, torch_neuronx.get_emulator_op_counts())
        expected = f(x)
        assert out.device == torch.device("neuron:0") and out.dtype == expected.dtype, name
        assert out.stride() == expected.stride() and torch.equal(out.cpu(), expected), name


def test_zero_sum_mean_cat_outside_the_common_case_take_the_fallback():
    x = torch.arange(60, dtype=torch.int32).reshape(6, 10)
    f = torch.randn(6, 10)
    cases = {
        "sum_int": lambda t, u: t.sum(1), "sum_half_to_float": lambda t, u: u.half().sum(1, dtype=torch.float32),
        "cat_mixed_dtypes": lambda t, u: torch.cat([t, u]), "mean_to_half": lambda t, u: u.mean(0, dtype=torch.half),
        "zero_strided": lambda t, u: u.clone()[:, ::2].zero_(), "zero_int64_rule": lambda t, u: t.long().zero_(),
    }
    for name, fn in cases.items():
        torch_neuronx.clear_op_tracking()
        out = fn(x.neuron(), f.neuron())
        assert fallback_calls() > 0, name
        assert torch.equal(out.cpu(), fn(x, f)), name
    with pytest.raises(RuntimeError, match=r"found at least two devices, neuron:0 and cpu! \(when running aten::cat "
                                           r"on neuron\)\. Non-scalar tensor arg0\[1\] is on cpu device"):
        torch.cat([f.neuron(), f])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_training_step_ops_match_cpu_without_fallback(dtype):
    """The rest of a causal LM's training step short of the fallback (HostAliasOps.cpp, RegisterHostKernels.cpp):
    fill_, index_select, flash attention, log_softmax, nll_loss, embedding backward, silu backward, cos, sin;
    each forward and backward bit-equal to CPU."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 8, generator=g).to(dtype) for _ in range(3))
    mask = torch.randn(16, 16, generator=g).to(dtype)
    logits = torch.randn(12, 20, generator=g).to(dtype)
    target = torch.randint(0, 20, (12,), generator=g).index_fill(0, torch.tensor([3]), -100)
    weight = torch.rand(20, generator=g).to(dtype)
    table = torch.randn(20, 6, generator=g).to(dtype)
    ids = torch.randint(0, 20, (3, 5), generator=g)
    x = torch.randn(7, 9, generator=g).to(dtype)
    F = torch.nn.functional
    cases = {
        "fill_": lambda d: (d["x"].clone().fill_(1.5),),
        # (its backward is index_add_, which takes the fallback)
        "index_select": lambda d: (d["table"].detach().index_select(0, d["ids"].flatten()),),
        "sdpa_causal": lambda d: (F.scaled_dot_product_attention(d["q"], d["k"], d["v"], is_causal=True),),
        "sdpa_mask": lambda d: (F.scaled_dot_product_attention(d["q"], d["k"], d["v"], attn_mask=d["mask"]),),
        "cross_entropy": lambda d: (F.cross_entropy(d["logits"], d["target"]),),
        "cross_entropy_weight_sum": lambda d: (F.cross_entropy(d["logits"], d["target"], weight=d["weight"],
                                                               reduction="sum"),),
        "embedding": lambda d: (F.embedding(d["ids"], d["table"], padding_idx=2),),
        "silu": lambda d: (F.silu(d["x"]),),
        "cos_sin": lambda d: (d["x"].cos(), d["x"].sin()),
    }
    grads = {"q", "k", "v", "logits", "table", "x"}
    for name, f in cases.items():
        results = {}
        for device in ("cpu", "neuron"):
            d = {n: t.to(device).requires_grad_(n in grads) for n, t in
                 dict(q=q, k=k, v=v, mask=mask, logits=logits, target=target, weight=weight, table=table, ids=ids,
                      x=x).items()}
            torch_neuronx.clear_op_tracking()
            outs = f(d)
            backward = ()
            if outs[0].requires_grad:
                backward = torch.autograd.grad(sum(o.float().sum() for o in outs), [d[n] for n in sorted(grads)],
                                               allow_unused=True)
            if device == "neuron":
                assert fallback_calls() == 0, (name, torch_neuronx.get_emulator_op_counts())
            results[device] = [o.detach().cpu() for o in outs] + [b.cpu() for b in backward if b is not None]
        assert len(results["cpu"]) == len(results["neuron"]), name
        for a, b in zip(results["cpu"], results["neuron"]):
            assert a.dtype == b.dtype and torch.equal(a, b), name


def test_training_step_ops_outside_the_common_case_take_the_fallback():
    f = torch.randn(6, 10)
    cases = {
        "fill_int": lambda dev: torch.zeros(4, dtype=torch.int32, device=dev).fill_(3),
        "index_select_int": lambda dev: torch.arange(10, device=dev).index_select(0, torch.tensor([2, 5], device=dev)),
    }
    for name, fn in cases.items():
        torch_neuronx.clear_op_tracking()
        out = fn("neuron")
        assert fallback_calls() > 0, name
        assert torch.equal(out.cpu(), fn("cpu")), name
    # CUDA's errors for an argument on another device, through the fallback
    with pytest.raises(RuntimeError, match=r"two devices, neuron:0 and cpu! \(when running aten::index_select"):
        f.neuron().index_select(0, torch.tensor([1, 0, 3]))
    with pytest.raises(RuntimeError, match=r"two devices, neuron:0 and cpu! \(when running aten::nll_loss_forward"):
        torch.nn.functional.cross_entropy(f.neuron(), torch.tensor([1] * 6))
    q = torch.randn(1, 2, 4, 8).neuron()
    with pytest.raises(RuntimeError, match="two devices"):
        torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=torch.zeros(4, 4))


def test_host_alias_ops_count_signatures_like_the_fallback():
    """A signature covers every tensor of a list (cat) and a given optional tensor (a mask), as the fallback's."""
    a, b = torch.ones(2, 3, device="neuron"), torch.ones(4, 3, device="neuron")
    q = torch.randn(1, 2, 4, 8).neuron()
    torch_neuronx.clear_op_tracking()
    for pair in ([a, a], [a, b], [a, b], [b, a]):
        torch.cat(pair)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    sdpa(q, q, q), sdpa(q, q, q), sdpa(q, q, q, attn_mask=torch.zeros(4, 4, device="neuron"))
    counts = torch_neuronx.get_op_signature_counts()
    assert counts["aten::cat"] == 3
    assert counts["aten::_scaled_dot_product_flash_attention_for_cpu"] == 2
    assert torch_neuronx.get_op_counts()["aten::cat"] == 4
