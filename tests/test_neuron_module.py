"""torch.neuron mirrors torch.cuda; torch.accelerator and torch.autocast work for neuron."""

import os

import pytest
import torch

import torch_neuronx


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
    with torch.neuron.device(2):
        assert torch.neuron.get_device_name() == "neuron:0"  # TorchNeuron's default: device 0
    assert torch.neuron.get_device_name(torch.device("neuron:1")) == "neuron:1"
    with pytest.raises(ValueError, match="expected torch.device or int"):
        torch.neuron.get_device_name("neuron:1")
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
    # TorchNeuron's format (also under torch_neuronx.memory); CUDA's flat keys through torch.accelerator.
    torch.neuron.reset_accumulated_memory_stats()
    y = torch.empty(256, device="neuron")
    del y
    stats = torch_neuronx.memory.memory_stats()
    assert stats["allocated_bytes"]["current"] == before and stats["allocated_bytes"]["peak"] >= before + (1 << 20)
    assert stats["reserved_bytes"] == stats["active_bytes"] == stats["allocated_bytes"]
    assert stats["allocation_requests"] == 1 and stats["num_tensor_frees"] == 1
    assert stats["num_ooms"] == 0 and stats["num_alloc_retries"] == 0
    assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] == before
    torch.neuron.empty_cache()
    summary = torch.neuron.memory_summary()
    assert "Neuron Memory Summary, Device 0" in summary and "Allocations: 1" in summary
    assert len(torch.neuron.memory_summary(abbreviated=True)) < len(summary)


def test_eager_random_ops_draw_from_the_cpu_generator():
    # As on Trainium (random ops take TorchNeuron's CPU fallback): one stream with the CPU's numbers.
    torch.manual_seed(0)
    cpu = [torch.randn(3), torch.randn(3), torch.rand(4)]
    torch.manual_seed(0)
    mixed = [torch.randn(3), torch.randn(3, device="neuron"), torch.rand(4, device="neuron:1")]
    assert all(torch.equal(a, b.cpu()) for a, b in zip(cpu, mixed))
    torch.manual_seed(1)
    d = torch.nn.functional.dropout(torch.ones(1000, device="neuron"), 0.5)
    torch.manual_seed(1)
    assert torch.equal(d.cpu(), torch.nn.functional.dropout(torch.ones(1000), 0.5))
    # Each core's own generator: TorchNeuron's 16-byte (seed, offset) state, seeded by torch.manual_seed,
    # untouched by eager random ops, never touching the CPU's.
    torch.manual_seed(5)
    assert torch.neuron.initial_seed() == 5
    s = torch.neuron.get_rng_state()
    assert s.dtype == torch.uint8 and s.numel() == 16 and int.from_bytes(bytes(s[:8].tolist()), "little") == 5
    torch.randn(8, device="neuron")
    assert torch.equal(torch.neuron.get_rng_state(), s)
    state = torch.random.get_rng_state()
    torch.neuron.seed()
    torch.neuron.manual_seed(9)
    assert torch.equal(torch.random.get_rng_state(), state)
    # An explicit neuron generator draws reproducibly from its state.
    g = torch.Generator(device="neuron").manual_seed(9)
    saved = g.get_state()
    y = torch.randn(4, device="neuron", generator=g)
    assert not torch.equal(g.get_state(), saved)  # its offset moved on
    g.set_state(saved)
    assert torch.equal(torch.randn(4, device="neuron", generator=g).cpu(), y.cpu())
    torch.neuron.set_rng_state(s, device=1)
    assert torch.equal(torch.neuron.get_rng_state(1), s)
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.neuron.set_rng_state(torch.zeros(5056, dtype=torch.uint8))


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
    # The current stream's operations at module level, and TorchNeuron's keyword names.
    torch.neuron.wait_stream(s)
    torch.neuron.wait_event(torch.neuron.record_event())
    assert torch.neuron.query()
    torch.neuron._sleep(1000)
    with torch.neuron.stream(stream=s):
        assert torch.neuron.current_stream() == s
    with torch_neuronx.StreamContext(stream=s):
        assert torch_neuronx.current_stream() == s
    torch.neuron.set_stream(stream=s)
    torch.neuron.set_stream(stream=cur)
    assert torch_neuronx.streams.Stream is torch.neuron.Stream
    # A stream of another device makes that device current; leaving restores both devices' streams.
    s0, s1 = torch.neuron.Stream(device=0), torch.neuron.Stream(device=1)
    cur1 = torch.neuron.current_stream(1)
    with torch.neuron.stream(s0):
        with torch.neuron.stream(s1):
            assert torch.neuron.current_device() == 1 and torch.neuron.current_stream() == s1
        assert torch.neuron.current_device() == 0 and torch.neuron.current_stream() == s0
        assert torch.neuron.current_stream(1) == cur1
    assert torch.neuron.current_stream() == cur


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


def test_torchneuron_utils_answer_for_the_emulated_instance():
    from torch_neuronx import utils

    assert utils.get_platform_target() == "trn2" and utils.get_lnc_setting() == "2"
    assert utils.get_logical_neuron_cores() == "2" and utils.get_worker_multiplier() == 1
    assert utils.is_float8_e4m3_supported() and not utils.is_mxocp_supported()
    # TorchNeuron's default eager path (torch-mlir), whose op names op tracking reports; set at import.
    assert utils.is_sync_mode_enabled() and utils.use_mlir_aten_ops()
    assert os.environ["TORCH_NEURONX_MLIR_ATEN_OPS"] == "1"
    ops = utils.get_neuron_registered_ops()
    assert {"linear", "embedding", "add", "_foreach_add"} <= ops and "normal_" not in ops and len(ops) == 193
    assert "add.Tensor" in utils.get_neuron_registered_ops(keep_variant=True)
    tree = {"a": [torch.ones(2), (torch.zeros(1), 3)]}
    moved = utils.move_pytree_to_neuron(tree)
    assert moved["a"][0].device.type == "neuron" and moved["a"][1][1] == 3 and isinstance(moved["a"][1], tuple)
    back = utils.move_pytree_to_cpu(moved)
    assert back["a"][0].device.type == "cpu" and torch.equal(back["a"][1][0], tree["a"][1][0])
    assert utils.get_device_from_tensors([[], (moved["a"][0],)]) == moved["a"][0].device
    torch_neuronx.clear_op_tracking()
    utils.log_executed_op("my_lib::fused_kernel")
    utils.log_offloaded_op("my_lib::host_step")
    assert torch_neuronx.get_executed_ops() == ["my_lib::fused_kernel"]
    assert torch_neuronx.get_fallback_ops() == ["my_lib::host_step"]
