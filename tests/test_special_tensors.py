"""Tensors of a special kind on neuron: each works as on CPU, or raises a clear error; none crashes the process.

ZeroTensors (what autograd formulas return for a gradient known to be zero: `torch.sgn(x).backward()`
used to kill the process), conjugate and negative bit views, and the factories and copies of layouts
Neuron does not have (quantized, sparse, nested, MKLDNN) and of meta tensors.
"""

import pytest
import torch

from helpers import run_python


def _zero(device, size=(3,), dtype=torch.float32):
    return torch.ops.aten._efficientzerotensor(size, dtype=dtype, device=device)


def test_efficient_zero_tensor_is_a_zero_tensor_as_on_cpu():
    z = _zero("neuron")
    assert z._is_zerotensor() and z.device == torch.device("neuron:0") and z.dtype == torch.float32
    x = torch.randn(3)
    for name, op in [("add", lambda z, x: z + x), ("mul", lambda z, x: z * x), ("sub", lambda z, x: x - z),
                     ("exp", lambda z, x: z.exp()), ("matmul", lambda z, x: z @ x), ("sum", lambda z, x: z.sum()),
                     ("clone", lambda z, x: z.clone()), ("contiguous", lambda z, x: z.contiguous()),
                     ("view", lambda z, x: z.view(3, 1)), ("as_strided", lambda z, x: z.as_strided((2,), (1,))),
                     ("to float16", lambda z, x: z.to(torch.float16)), ("cat", lambda z, x: torch.cat([z, x]))]:
        got, want = op(z, x.to("neuron")), op(_zero("cpu"), x)
        assert got.device.type == "neuron" and got.dtype == want.dtype, name
        assert got._is_zerotensor() == want._is_zerotensor(), name
        assert torch.equal(got.cpu().clone(), want.clone()), name
    assert torch.equal(z.cpu(), torch.zeros(3)) and torch.equal(z.to(torch.float16).cpu(), torch.zeros(3).half())
    moved = _zero("cpu").to("neuron")                                  # _to_copy of a ZeroTensor
    assert moved.device.type == "neuron" and torch.equal(moved.cpu(), torch.zeros(3))
    assert z[1].item() == 0.0
    with pytest.raises(RuntimeError, match="ZeroTensors are immutable"):
        z.add_(1)


def test_sgn_backward_runs_and_matches_cpu_in_a_fresh_process():
    """It used to segfault: the subprocess proves the process survives (and the gradients are CPU's)."""
    code = """
import torch
for dtype in (torch.float32, torch.bfloat16, torch.complex64):
    x = torch.randn(5, dtype=dtype)
    grads = []
    for device in ("cpu", "neuron"):
        t = x.to(device).detach().requires_grad_()  # a leaf of its own on each device
        out = torch.sgn(t)
        out.backward(torch.ones_like(out))
        grads.append(t.grad.cpu())
    assert torch.allclose(grads[0], grads[1]), (dtype, grads)
    print("ok", dtype, flush=True)
x = torch.randn(4, device="neuron", requires_grad=True)
(torch.sgn(x) * x).sum().backward()          # the ZeroTensor gradient flows into a real one
print("mixed", torch.equal(x.grad.cpu(), torch.sgn(x.detach().cpu())))
"""
    r = run_python(code, timeout=180)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stderr[-3000:]}"
    assert r.stdout.count("ok ") == 3 and "mixed True" in r.stdout, r.stdout


def test_conjugate_and_negative_views_as_on_cpu():
    x = torch.randn(4, 3, dtype=torch.complex64)
    n = x.to("neuron")
    for name, view in [("conj", torch.conj), ("neg", torch._neg_view)]:
        got, want = view(n), view(x)
        assert (got.is_conj(), got.is_neg()) == (want.is_conj(), want.is_neg()), name
        assert got.data_ptr() == n.data_ptr(), name                   # a view, not a copy
        for what, op in [("cpu", lambda t: t.cpu()), ("add", lambda t: t + 1), ("matmul", lambda t: t @ t.mT),
                         ("resolve", lambda t: t.resolve_conj().resolve_neg()), ("clone", lambda t: t.clone()),
                         ("as_strided", lambda t: t.as_strided((2, 2), (3, 1))), ("real", lambda t: t.real * 1),
                         ("copy into", lambda t: torch.empty_like(t).copy_(t))]:
            assert torch.equal(op(got).cpu().resolve_conj().resolve_neg(), op(want).resolve_conj().resolve_neg()), \
                (name, what)


@pytest.mark.parametrize("what, make, match", [
    ("quantized empty", lambda: torch._empty_affine_quantized([2], scale=0.1, zero_point=0, dtype=torch.quint8,
                                                              device="neuron"), "quantized"),
    ("quantized move", lambda: torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.quint8).to("neuron"),
     "quantized"),
    ("sparse empty", lambda: torch.empty(2, 2, layout=torch.sparse_coo, device="neuron"), "sparse|Sparse"),
    ("sparse tensor", lambda: torch.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3,), device="neuron"), "sparse|Sparse"),
    ("sparse move", lambda: torch.eye(2).to_sparse().to("neuron"), "sparse|Sparse"),
    # a compressed-sparse or nested container moves to neuron (nothing runs), its first op raises
    ("csr move and use", lambda: torch.eye(2).to_sparse_csr().to("neuron") * 2, "SparseCsr|sparse compressed"),
    ("nested tensor and use",
     lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], device="neuron") * 2, "nested"),
    ("mkldnn empty", lambda: torch.empty(2, layout=torch._mkldnn, device="neuron"), "mkldnn|MKLDNN|layout"),
])
def test_layouts_neuron_lacks_raise_a_clear_error(what, make, match):
    """The layout, the op and the fix (csrc/aten/native/UnsupportedLayouts.cpp); the process lives on."""
    with pytest.raises((NotImplementedError, RuntimeError), match=match):
        make()
    assert torch.equal(torch.ones(2, device="neuron").cpu(), torch.ones(2))  # the process and device still work


def test_meta_tensors_copy_as_on_cpu():
    m = torch.empty(2, 3, device="meta")
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        m.to("neuron")
    assert torch.empty_like(m, device="neuron").shape == (2, 3)
    assert torch.ones(2, device="neuron").to("meta").device.type == "meta"
