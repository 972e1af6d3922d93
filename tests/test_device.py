"""The `neuron` device: registration, tensors, copies, views, serialization, mixed-device errors."""

import io

import pytest
import torch

from helpers import run_python


def test_autoload_and_registration():
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == 64  # default emulated instance: trn2.48xlarge at LNC=2
    d = torch.device("neuron:3")
    assert d.type == "neuron" and d.index == 3


def test_plain_import_torch_loads_plugin_in_fresh_process():
    r = run_python("import torch; print(torch.randn(2, device='neuron').device)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "neuron:0"


def test_import_torch_neuronx_first_also_works():
    r = run_python("import torch_neuronx, torch; print(torch.ones(1).neuron().is_neuron)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


def test_distribution_metadata_is_torch_neuronx():
    import importlib.metadata as md
    assert md.version("torch_neuronx") == md.version("torch-neuronx")


def test_factories_and_moves():
    a = torch.randn(3, 4, device="neuron")
    assert a.is_neuron and a.device == torch.device("neuron:0")
    b = torch.empty_like(a)
    assert b.device == a.device and b.shape == a.shape
    c = torch.ones(2, 2).neuron()
    assert c.is_neuron
    z = torch.zeros(5, device="neuron:1", dtype=torch.bfloat16)
    assert z.device.index == 1 and z.dtype == torch.bfloat16
    assert torch.equal(z.cpu(), torch.zeros(5, dtype=torch.bfloat16))
    r = torch.arange(10, device="neuron")
    assert torch.equal(r.cpu(), torch.arange(10))
    e = torch.eye(3, device="neuron")
    assert torch.equal(e.cpu(), torch.eye(3))
    f = torch.full((2, 3), 7.0, device="neuron")
    assert f.sum().item() == 42.0


def test_copies_strided_and_dtype_conversion():
    x = torch.randn(4, 6)
    n = x.to("neuron")
    assert torch.equal(n.t().contiguous().cpu(), x.t().contiguous())
    assert torch.equal(n.t().cpu(), x.t())
    assert torch.equal(n.to(torch.bfloat16).cpu(), x.to(torch.bfloat16))
    assert torch.equal(n.cpu().to("neuron:2").cpu(), x)  # between cores through the host (see below)
    assert n.cpu().to("neuron:2").device.index == 2
    dst = torch.empty(6, 4, device="neuron")
    dst.copy_(x.t())
    assert torch.equal(dst.cpu(), x.t())
    # broadcast copy
    row = torch.randn(6)
    dst2 = torch.empty(4, 6, device="neuron")
    dst2.copy_(row)
    assert torch.equal(dst2.cpu(), row.expand(4, 6))


def test_views_share_device_memory():
    a = torch.zeros(4, 4, device="neuron")
    v = a[1:3, ::2]
    v.fill_(5.0)
    assert a.sum().item() == 20.0
    w = a.view(16)
    w[0] = 1.0
    assert a[0, 0].item() == 1.0
    u = a.unfold(0, 2, 1)
    assert u.shape == (3, 4, 2)
    assert u.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    c = torch.view_as_real(torch.zeros(3, dtype=torch.complex64, device="neuron"))
    assert c.shape == (3, 2) and c.is_neuron


def test_in_place_out_and_resize():
    a = torch.ones(3, device="neuron")
    a.add_(2)
    assert a.cpu().tolist() == [3, 3, 3]
    out = torch.empty(0, device="neuron")
    torch.add(a, a, out=out)  # out= resized by the host kernel
    assert out.shape == (3,) and out.cpu().tolist() == [6, 6, 6] and out.is_neuron
    out.resize_(10)
    assert out.numel() == 10
    s = torch.empty(0, device="neuron")
    s.set_(a)
    assert s.data_ptr() == a.data_ptr()
    with pytest.raises(RuntimeError, match="set_: the source tensor is on cpu device, expected neuron"):
        s.set_(torch.randn(3))


def test_multi_output_and_list_ops():
    x = torch.randn(5, 7)
    n = x.to("neuron")
    vals, idx = n.max(dim=1)
    rv, ri = x.max(dim=1)
    assert torch.equal(vals.cpu(), rv) and torch.equal(idx.cpu(), ri)
    parts = n.split(2, dim=1)
    for p, q in zip(parts, x.split(2, dim=1)):
        assert p.is_neuron and torch.equal(p.cpu(), q)
    cat = torch.cat([n, n], dim=0)
    assert torch.equal(cat.cpu(), torch.cat([x, x]))
    s, i = torch.sort(n, dim=1)
    assert torch.equal(s.cpu(), torch.sort(x, dim=1).values)


def test_index_with_cpu_indices_is_allowed_like_cuda():
    n = torch.arange(10.0, device="neuron")
    assert n[torch.tensor([1, 3])].cpu().tolist() == [1.0, 3.0]
    assert n[torch.tensor([1, 3], device="neuron")].cpu().tolist() == [1.0, 3.0]


def test_scalar_cpu_tensor_mixes_like_cuda():
    n = torch.ones(3, device="neuron")
    assert (n * torch.tensor(2.0)).cpu().tolist() == [2.0, 2.0, 2.0]


def test_mixed_devices_raise_like_cuda():
    n = torch.ones(3, device="neuron")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*neuron:0.*cpu"):
        n + torch.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*neuron:0.*neuron:1"):
        n + torch.ones(3, device="neuron:1")


def test_copies_between_cores_raise_as_on_torchneuron():
    x = torch.randn(3)
    a = x.to("neuron:0")
    with pytest.raises(RuntimeError, match=r"Device-to-device copy requires tensors on same Neuron core: neuron:0 "
                                           r"-> neuron:1.*t.cpu\(\).to\('neuron:1'\)"):
        torch.empty(3, device="neuron:1").copy_(a)
    with pytest.raises(RuntimeError, match="same Neuron core"):
        a.to("neuron:1")
    assert torch.equal(a.cpu().to("neuron:1").cpu(), x)        # through the host, as the message says
    assert torch.equal(torch.empty(3, device="neuron:0").copy_(a).cpu(), x)  # on one core


def test_invalid_device_index():
    # A tensor on a missing core: RuntimeError, as TorchNeuron's C++ check and CUDA ("invalid device ordinal").
    with pytest.raises(RuntimeError, match="Invalid device index neuron:99: Device index 99 is out of range"):
        torch.ones(2, device="neuron:99")
    # Past int's range too, named in the same sentence (not pybind's argument TypeError).
    with pytest.raises(ValueError, match="Invalid device index neuron:4294967296"):
        torch.neuron.get_device_properties(4294967296)
    with pytest.raises(ValueError, match="Invalid device index neuron:64: Device index 64 is out of range. Valid "
                                         "range is 0 to 63 for this process"):
        torch.neuron.set_device(64)


def test_save_load_roundtrip(tmp_path):
    x = torch.randn(3, 3, device="neuron:1")
    p = tmp_path / "t.pt"
    torch.save({"x": x, "view": x[1]}, p)
    back = torch.load(p)
    assert back["x"].device == torch.device("neuron:1")
    assert torch.equal(back["x"].cpu(), x.cpu())
    cpu = torch.load(p, map_location="cpu")
    assert cpu["x"].device.type == "cpu" and torch.equal(cpu["x"], x.cpu())
    buf = io.BytesIO()
    torch.save(torch.nn.Linear(2, 2).to("neuron").state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf)
    assert sd["weight"].is_neuron


def test_pinned_memory():
    x = torch.randn(16).pin_memory()
    assert x.is_pinned()
    assert not torch.randn(16).is_pinned()
    assert torch.equal(x.to("neuron", non_blocking=True).cpu(), x)


def test_module_to_and_neuron_method():
    m = torch.nn.Linear(4, 2).neuron()
    assert m.weight.is_neuron
    assert m(torch.randn(3, 4, device="neuron")).shape == (3, 2)


def test_item_and_tolist():
    n = torch.tensor([1.5, 2.5]).to("neuron")
    assert n[0].item() == 1.5
    assert n.tolist() == [1.5, 2.5]
    assert bool(n.sum() > 3)


def test_module_to_keeps_parameter_identity_like_cuda():
    m = torch.nn.Linear(3, 3)
    w = m.weight
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    m.to("neuron")
    assert m.weight is w and w.is_neuron  # optimizers built before .to() still see the parameters
    m(torch.randn(2, 3, device="neuron")).sum().backward()
    opt.step()
    assert w.grad.is_neuron


def test_integer_histc_like_cuda():
    # Transformers' MoE routing counts tokens per expert with histc on int32 on every device but CPU/MPS.
    x = torch.tensor([0, 1, 1, 3], dtype=torch.int32)
    h = torch.histc(x.to("neuron"), bins=4, min=0, max=3)
    assert h.dtype == torch.int32 and h.is_neuron and h.cpu().tolist() == [1, 2, 0, 1]
    f = torch.histc(x.float().to("neuron"), bins=4, min=0, max=3)
    assert torch.equal(f.cpu(), torch.histc(x.float(), bins=4, min=0, max=3))


def test_histc_out_needs_the_input_dtype_like_cpu():
    x = torch.randn(100)
    with pytest.raises(RuntimeError, match="input tensor and hist tensor should have the same dtype, but got input "
                                           "torch.float32 and hist torch.int32"):
        torch.histc(x.to("neuron"), bins=10, out=torch.zeros(10, dtype=torch.int32, device="neuron"))
    out = torch.zeros(10, device="neuron")
    torch.histc(x.to("neuron"), bins=10, out=out)
    assert torch.equal(out.cpu(), torch.histc(x, bins=10))


def test_contiguous_accepts_preserve_format_as_torchneuron():
    """TorchNeuron's contiguous takes memory_format=torch.preserve_format (PyTorch's composite refuses it):
    the result is contiguous, with the values and gradient of contiguous()."""
    x = torch.randn(3, 4)
    xn = x.to("neuron").requires_grad_()
    y = xn.t().contiguous(memory_format=torch.preserve_format)
    assert y.is_contiguous() and torch.equal(y.detach().cpu(), x.t().contiguous())
    (y * torch.arange(12.0, device="neuron").reshape(4, 3)).sum().backward()
    assert torch.equal(xn.grad.cpu(), torch.arange(12.0).reshape(4, 3).t())
    z = torch.randn(2, 3, 4, 5).to("neuron").contiguous(memory_format=torch.channels_last)  # as PyTorch
    assert z.is_contiguous(memory_format=torch.channels_last)


def test_convolution_backward_leaves_masked_gradients_undefined():
    g, x, w = torch.randn(2, 2, 10), torch.randn(2, 3, 10), torch.randn(2, 3, 3)
    for mask in ([True, False, True], [False, False, True], [False, True, False]):
        args = dict(bias_sizes=[2], stride=[1], padding=[1], dilation=[1], transposed=False, output_padding=[0],
                    groups=1, output_mask=mask)
        got = torch.ops.aten.convolution_backward(g.to("neuron"), x.to("neuron"), w.to("neuron"), **args)
        ref = torch.ops.aten.convolution_backward(g, x, w, **args)
        for want, out, r in zip(mask, got, ref):
            assert (out is not None) == want
            if want:
                torch.testing.assert_close(out.cpu(), r)


def test_norms_of_channels_last_input_run_the_host_kernel_like_cpu():
    """An image converted from numpy is NHWC in memory. PyTorch's composite group norm (its kernel for backends
    without one) views the input and fails on that layout; neuron runs the host kernel, as CPU does."""
    import torch.nn.functional as F
    x = torch.randn(1, 5, 6, 4).permute(0, 3, 1, 2)  # (N, C, H, W) over NHWC memory
    assert x.is_contiguous(memory_format=torch.channels_last)
    xn = x.to("neuron").requires_grad_()
    x.requires_grad_()
    out, ref = F.group_norm(xn, 2), F.group_norm(x, 2)
    assert torch.equal(out.detach().cpu(), ref.detach())
    out.sum().backward()
    ref.sum().backward()
    assert torch.equal(xn.grad.cpu(), x.grad)
    y = torch.randn(2, 3, 8).transpose(0, 1)
    assert torch.equal(F.layer_norm(y.to("neuron"), (8,)).cpu(), F.layer_norm(y, (8,)))
