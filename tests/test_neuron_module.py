"""torch.neuron mirrors torch.cuda; torch.accelerator and torch.autocast work for neuron."""

import pytest
import torch


def test_device_management():
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(2):
        assert torch.neuron.current_device() == 2
        assert torch.empty(1, device="neuron").device.index == 2
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device("neuron:1")
    try:
        assert torch.neuron.current_device() == 1
        assert torch.ones(1, device="neuron").device == torch.device("neuron:1")
    finally:
        torch.neuron.set_device(0)
    assert torch.neuron.get_device_name(3) == "neuron:3"
    p = torch.neuron.get_device_properties(0)
    assert p.name == "Trainium2 NeuronCore-v3" and p.total_memory == (24 << 30) - 2 * (96 << 20)  # bank less reserve
    assert torch.neuron.is_bf16_supported() and torch.neuron.is_initialized()
    torch.neuron.synchronize()
    x = torch.ones(1, device="neuron:2")
    with torch.neuron.device_of(x):
        assert torch.neuron.current_device() == 2


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.device_count() == torch.neuron.device_count()
    torch.accelerator.set_device_index(1)
    try:
        assert torch.accelerator.current_device_index() == 1
    finally:
        torch.accelerator.set_device_index(0)
    torch.accelerator.synchronize()
    x = torch.empty(1024, device="neuron")
    assert torch.accelerator.memory_allocated() >= 4096
    del x


def test_memory_stats_track_tensors():
    torch.neuron.reset_peak_memory_stats()
    before = torch.neuron.memory_allocated()
    x = torch.empty(1 << 20, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_allocated() == before + (1 << 20)
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()
    free, total = torch.neuron.mem_get_info()
    assert total == (24 << 30) - 2 * (96 << 20) and free == total - torch.neuron.memory_allocated()
    del x
    assert torch.neuron.memory_allocated() == before
    assert torch.neuron.max_memory_allocated() >= before + (1 << 20)
    stats = torch.neuron.memory_stats()
    assert stats["allocated_bytes.all.current"] == before
    torch.neuron.empty_cache()
    assert "PyTorch Neuron memory summary, device ID 0" in torch.neuron.memory_summary()


def test_rng_per_device_and_matches_cpu_stream():
    torch.neuron.manual_seed(123)
    a = torch.randn(5, device="neuron")
    torch.manual_seed(123)
    assert torch.equal(a.cpu(), torch.randn(5))  # same engine as the CPU generator for the same seed
    torch.neuron.manual_seed(7)
    s = torch.neuron.get_rng_state()
    x = torch.rand(3, device="neuron")
    torch.neuron.set_rng_state(s)
    assert torch.equal(torch.rand(3, device="neuron").cpu(), x.cpu())
    torch.neuron.manual_seed_all(5)
    assert torch.equal(torch.rand(2, device="neuron:1").cpu(), torch.rand(2, device="neuron:0").cpu())
    g = torch.Generator(device="neuron").manual_seed(9)
    y = torch.randn(4, device="neuron", generator=g)
    g2 = torch.Generator(device="neuron").manual_seed(9)
    assert torch.equal(torch.randn(4, device="neuron", generator=g2).cpu(), y.cpu())
    assert torch.neuron.initial_seed() == 5
    d = torch.nn.functional.dropout(torch.ones(1000, device="neuron"), 0.5)
    assert 300 < (d == 0).sum().item() < 700


def test_streams_and_events():
    s = torch.neuron.Stream()
    assert s.device == torch.device("neuron:0")
    cur = torch.neuron.current_stream()
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        y = torch.ones(4, device="neuron") * 2
    assert torch.neuron.current_stream() == cur
    cur.wait_stream(s)
    e = torch.neuron.Event(enable_timing=True)
    e2 = torch.neuron.Event(enable_timing=True)
    e.record()
    y = y @ torch.ones(4, 4, device="neuron")
    e2.record()
    e2.synchronize()
    assert e2.query() and e.elapsed_time(e2) >= 0
    ev = s.record_event()
    cur.wait_event(ev)
    assert s.query()
    assert torch.neuron.default_stream().stream_id == 0


def test_autocast_as_on_cuda():
    """TorchNeuron's autocast follows CUDA's conventions: float16 by default, bf16 on request, BCE banned."""
    lin = torch.nn.Linear(8, 8).neuron()
    x = torch.randn(4, 8, device="neuron")
    with torch.autocast("neuron"):
        y = lin(x)
        sm = torch.softmax(y, -1)
        with pytest.raises(RuntimeError, match="(?s)unsafe to autocast.*binary_cross_entropy_with_logits"):
            torch.nn.functional.binary_cross_entropy(torch.sigmoid(y), torch.rand(4, 8, device="neuron"))
        torch.nn.functional.binary_cross_entropy_with_logits(y, torch.rand(4, 8, device="neuron"))  # the safe one
    assert y.dtype == torch.float16 and torch.get_autocast_dtype("neuron") == torch.float16
    assert sm.dtype == torch.float32  # softmax runs in fp32, as on CUDA
    with torch.autocast("neuron", dtype=torch.bfloat16):
        z = x @ x.t()
    ref = (x.cpu().bfloat16() @ x.cpu().t().bfloat16())
    assert z.dtype == torch.bfloat16 and torch.equal(z.cpu(), ref)
    assert torch.neuron.get_amp_supported_dtype() == [torch.float32, torch.float16, torch.bfloat16]  # as TorchNeuron


def test_set_device_rejects_bad_index():
    with pytest.raises(ValueError, match="Invalid device index neuron:64"):
        torch.neuron.set_device(64)
    with pytest.raises(ValueError, match="Expected a neuron device"):
        torch.neuron.set_device("cpu")
