"""Seeing inside a run on neuron as on CUDA: memory_summary, memory snapshots (PyTorch's visualizer
opens them), the profiler, `torchneuron top`. Each is used as a user would, on a real training step."""

from __future__ import annotations

import gc
import io
import pickle

import pytest
import torch

from helpers import tiny_llama


def _train_step(model, opt, ids):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def _tiny_llama_on_neuron():
    model = tiny_llama().train().to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(3, 256, (2, 16), device="neuron")
    return model, opt, ids


def test_memory_stats_and_summary_in_torchneurons_format():
    torch.neuron.reset_peak_memory_stats()
    before = torch.neuron.memory_stats()
    x = torch.empty(3 << 20, dtype=torch.uint8, device="neuron")
    y = torch.empty(1 << 20, dtype=torch.uint8, device="neuron")
    del y
    stats = torch.neuron.memory_stats()
    cur = before["allocated_bytes"]["current"]
    assert stats["allocated_bytes"]["current"] == cur + (3 << 20)
    assert stats["allocated_bytes"]["peak"] >= cur + (4 << 20)
    assert stats["allocated_bytes"]["allocated"] >= before["allocated_bytes"]["allocated"] + (4 << 20)
    assert stats["allocated_bytes"]["freed"] >= before["allocated_bytes"]["freed"] + (1 << 20)
    assert stats["allocation_requests"] >= before["allocation_requests"] + 2
    assert stats["num_tensor_frees"] >= before["num_tensor_frees"] + 1
    text = torch.neuron.memory_summary()
    assert "Neuron Memory Summary, Device 0" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("Allocated Memory"))
    current = row.split("|")[1].strip()
    assert current == f"{stats['allocated_bytes']['current'] / 2**20:,.1f} MiB", row
    budget = torch.neuron.mem_get_info(0)[1]
    assert f"HBM budget {budget / 2**30:,.1f} GiB" in text
    del x


def test_memory_snapshot_of_a_training_step_opens_in_pytorchs_visualizer(tmp_path):
    from torch.cuda import _memory_viz

    model, opt, ids = _tiny_llama_on_neuron()
    _train_step(model, opt, ids)  # optimizer state exists: the recorded step is a steady one
    torch.neuron.memory._record_memory_history(max_entries=100000)
    try:
        loss = _train_step(model, opt, ids)
        path = tmp_path / "snapshot.pickle"
        # The snapshot and memory_allocated must be read at one instant. A garbage collection between them
        # (the snapshot builds thousands of Python objects, which triggers one) frees the device tensors held
        # by reference cycles other code left behind, and then the segments exceed memory_allocated: collect
        # first, and keep the collector off while both are read.
        gc.collect()
        gc.disable()
        try:
            torch.neuron.memory._dump_snapshot(str(path))
            allocated = torch.neuron.memory_allocated(0)
        finally:
            gc.enable()
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)
    assert torch.isfinite(loss.detach().cpu())

    with open(path, "rb") as f:
        snap = pickle.load(f)
    trace = snap["device_traces"][0]
    allocs = [e for e in trace if e["action"] == "alloc"]
    frees = {e["addr"] for e in trace if e["action"] == "free_completed"}
    assert len(allocs) > 50, len(allocs)
    # The step's activations: the logits (batch x seq x vocab fp32) were allocated and freed within it.
    logits_bytes = 2 * 16 * 256 * 4
    logits = [e for e in allocs if e["size"] == logits_bytes]
    assert logits and any(e["addr"] in frees for e in logits)
    # Every allocation names the Python line that caused it; ours is among them.
    for e in allocs:
        assert e["frames"], e
    files = {f["filename"] for e in allocs for f in e["frames"]}
    assert any(name.endswith("test_observability.py") for name in files)
    assert any("modeling_llama" in name for name in files)
    assert all(e.get("device", 0) == 0 for e in trace)
    assert [len(t) for t in snap["device_traces"][1:]] == [0] * (len(snap["device_traces"]) - 1)

    # Segments: every live allocation of the core (parameters, AdamW state), those made during the step
    # with their frames; the sum is what the allocator reports.
    segs = [s for s in snap["segments"] if s["device"] == 0]
    assert sum(s["total_size"] for s in segs) == allocated
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert sum(s["total_size"] for s in segs) >= 3 * param_bytes  # weights + exp_avg + exp_avg_sq
    assert all(b["state"] == "active_allocated" for s in segs for b in s["blocks"])

    # PyTorch's own visualizer renders it.
    for render in (_memory_viz.trace_plot, _memory_viz.segment_plot):
        html = render(snap)
        assert "<html" in html.lower() or "<script" in html.lower()
    text = _memory_viz.trace(snap)
    assert "cudaMalloc(" in text and "del " in text and "cudaFree(" in text  # its names for the events
    assert "segments:" in _memory_viz.segsum(snap)
    assert _memory_viz.memory(snap, format_flamegraph=lambda lines: lines)  # the flamegraph input


def test_memory_history_off_records_nothing_and_oom_is_recorded():
    torch.neuron.memory._record_memory_history(enabled=None)
    x = torch.ones(1024, device="neuron")
    snap = torch.neuron.memory._snapshot()
    assert all(len(t) == 0 for t in snap["device_traces"])
    assert any(s["address"] == x.data_ptr() and s["frames"] == [] for s in snap["segments"])

    torch.neuron.memory._record_memory_history(context=None)
    try:
        y = torch.ones(2048, device="neuron")
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(1 << 40, dtype=torch.uint8, device="neuron")
        snap = torch.neuron.memory._snapshot()
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)
    trace = snap["device_traces"][0]
    alloc = next(e for e in trace if e["action"] == "alloc" and e["addr"] == y.data_ptr())
    assert alloc["size"] == 2048 * 4 and alloc["frames"] == []  # context=None: no stacks
    oom = next(e for e in trace if e["action"] == "oom")
    assert oom["size"] == 1 << 40 and oom["device_free"] > 0
    with pytest.raises(ValueError, match="enabled="):
        torch.neuron.memory._record_memory_history(enabled="yes")


def test_profiler_shows_neuron_kernels_with_device_time_and_memory(tmp_path):
    import json
    from torch.profiler import ProfilerActivity, profile

    assert ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()
    model, opt, ids = _tiny_llama_on_neuron()
    _train_step(model, opt, ids)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], profile_memory=True) as prof:
        _train_step(model, opt, ids)

    events = {e.key: e for e in prof.key_averages()}
    # The matrix multiplies of the step ran as neuron kernels: device time on the op that launched them.
    mm = [events[k] for k in ("aten::mm", "aten::addmm", "aten::bmm") if k in events]
    assert mm and all(e.device_time_total > 0 for e in mm), {k: e.device_time_total for k, e in events.items()}
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert kernels and all(e.device_index == 0 for e in kernels)
    assert any(e.name.startswith("aten::mm") for e in kernels)
    # profile_memory: the step's neuron allocations, attributed to the ops that made them.
    assert sum(e.device_memory_usage for e in prof.key_averages() if e.device_memory_usage > 0) > 0
    table = prof.key_averages().table(sort_by="device_time_total", row_limit=10)
    assert "neuron" in table.lower()

    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    kernel_events = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert any(e["name"].startswith("aten::mm") for e in kernel_events)
    assert any(e.get("cat") == "cpu_instant_event" and e.get("args", {}).get("Device Type") == 20
               for e in trace["traceEvents"])  # [memory] events of PrivateUse1 (device type 20)


# --- torchneuron top ------------------------------------------------------------------------------------------

_HOLDER = r"""
import json, sys, torch
x = torch.empty(3 << 20, dtype=torch.uint8, device="neuron:0")      # 3 MiB kept on the first core
y = torch.empty(5 << 20, dtype=torch.uint8, device="neuron:0"); del y  # a 5 MiB peak, freed
z = torch.ones(1000, device="neuron:1")                            # 4000 bytes on the second core
print(json.dumps({i: [torch.neuron.memory_allocated(i), torch.neuron.max_memory_allocated(i),
                      torch.neuron.mem_get_info(i)[1]] for i in (0, 1)}), flush=True)
sys.stdin.read()  # hold the cores until killed
"""


def _start_holder(env):
    import json
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)
    line = proc.stdout.readline()
    assert line, f"the holder process died (exit code {proc.wait()})"
    return proc, {int(k): v for k, v in json.loads(line).items()}


def _top_json(env) -> dict:
    import json
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "torch_neuronx.cli", "top", "--once", "--json"], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def test_top_shows_another_process_its_cores_and_exact_hbm_until_it_is_killed(tmp_path):
    import os
    import signal
    env = dict(os.environ, TORCHNEURON_CORE_REGISTRY=str(tmp_path / "cores"), NEURON_RT_VISIBLE_CORES="4-5",
               TORCHNEURON_INSTANCE="trn2.48xlarge", NEURON_LOGICAL_NC_CONFIG="2")
    proc, mine = _start_holder(env)
    try:
        view = _top_json(env)
        assert view["instance"] == "trn2.48xlarge" and view["physical_cores"] == 128
        assert view["physical_cores_held"] == 4  # two cores at LNC=2: two physical cores each
        rows = [c for c in view["cores"] if c["pid"] == proc.pid]
        assert [(c["core"], c["physical_cores"]) for c in rows] == [(4, [8, 9]), (5, [10, 11])]
        assert "-c" in rows[0]["command"] and "python" in rows[0]["command"]
        for row, index in zip(rows, (0, 1)):
            allocated, peak, budget = mine[index]
            assert (row["hbm_in_use"], row["hbm_peak"], row["hbm_budget"]) == (allocated, peak, budget), (row, mine)
        assert mine[0][:2] == [3 << 20, 8 << 20] and mine[1][:2] == [4000, 4000]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    view = _top_json(env)
    assert view["cores"] == [] and view["physical_cores_held"] == 0  # a killed process leaves the view


@pytest.mark.slow
def test_top_live_view_refreshes_as_processes_come_and_go(tmp_path):
    """`torchneuron top` in a terminal: the holder appears with its numbers, then disappears once killed."""
    import os
    import signal
    import subprocess
    import sys
    import time
    import pty
    import re
    import select
    env = dict(os.environ, TORCHNEURON_CORE_REGISTRY=str(tmp_path / "cores"), NEURON_RT_VISIBLE_CORES="2-3",
               TORCHNEURON_INSTANCE="trn2.48xlarge", NEURON_LOGICAL_NC_CONFIG="2", COLUMNS="160", TERM="xterm")
    main_fd, child_fd = pty.openpty()
    top = subprocess.Popen([sys.executable, "-m", "torch_neuronx.cli", "top", "--interval", "0.3"],
                           stdout=child_fd, stderr=child_fd, stdin=subprocess.DEVNULL, env=env)
    os.close(child_fd)
    seen = ""

    def read_until(pattern: str, timeout: float = 120) -> bool:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if select.select([main_fd], [], [], 0.5)[0]:
                seen += os.read(main_fd, 65536).decode(errors="replace")
                text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen)
                if re.search(pattern, text):
                    seen = ""
                    return True
        return False

    try:
        assert read_until("no process holds a NeuronCore"), seen
        proc, mine = _start_holder(env)
        try:
            assert read_until(rf"│ 2 \(nc 4-5\) │ +{proc.pid} │[^\n]*python -c import[^\n]*│ +3\.0 MiB │ +8\.0 MiB │"
                              rf" +23\.8 GiB │"), seen
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert read_until("no process holds a NeuronCore"), seen
    finally:
        top.send_signal(signal.SIGINT)
        # Keep draining the terminal while top exits: it redraws every 0.3 s, and once the pty's buffer is
        # full its writes (its last redraw on Ctrl-C included) block, so it could never finish exiting.
        deadline = time.monotonic() + 60
        while top.poll() is None and time.monotonic() < deadline:
            if select.select([main_fd], [], [], 0.2)[0]:
                try:
                    os.read(main_fd, 65536)
                except OSError:  # EIO: top closed its end of the terminal
                    time.sleep(0.05)
        code = top.wait(timeout=5)
        os.close(main_fd)
    assert code == 0


def test_legacy_autograd_profiler_with_use_device_neuron_times_the_step():
    """torch.autograd.profiler.profile(use_device="neuron"), the pre-Kineto API many scripts still use: each op's
    neuron time in key_averages() (without the core's legacy stubs every op's profiler callback failed, device
    times were 0 and CPU times negative)."""
    import time
    model, opt, ids = _tiny_llama_on_neuron()
    _train_step(model, opt, ids)
    start = time.perf_counter()
    with torch.autograd.profiler.profile(use_device="neuron") as prof:
        _train_step(model, opt, ids)
    wall_us = (time.perf_counter() - start) * 1e6
    events = {e.key: e for e in prof.key_averages()}
    mm = events["aten::mm"]
    assert mm.count > 0 and 0 < mm.device_time_total < wall_us, (mm.device_time_total, wall_us)
    assert all(0 <= e.cpu_time_total < wall_us for e in events.values())
    assert "NEURON total" in prof.key_averages().table(sort_by="device_time_total", row_limit=5)


def test_neuron_profiler_writes_the_trace_where_torchneuron_does(tmp_path):
    from torch.profiler import ProfilerActivity
    from torch_neuronx.profiling import NeuronProfiler, NRTProfilerError

    x = torch.randn(64, 64, device="neuron")
    with NeuronProfiler(pytorch_activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                        neuron_output_dir=str(tmp_path / "out"), event_filters={"nc": ["0", "4-7"]}) as prof:
        assert prof.is_active()
        (x @ x).sum().item()
    trace = (tmp_path / "out" / "pytorch_trace.json").read_text()
    assert "aten::mm" in trace and "kernel" in trace  # the neuron kernel on its device row
    assert "aten::mm" in prof.get_pytorch_trace()
    with pytest.raises(NRTProfilerError, match="no Neuron runtime.*pytorch_activities"):
        NeuronProfiler(neuron_output_dir=str(tmp_path)).start()
    with pytest.raises(ValueError, match="NeuronCore id or range"):
        NeuronProfiler(event_filters={"nc": ["7-4"]})


def test_metrics_count_only_while_enabled():
    from torch_neuronx import metrics

    metrics.set_enabled(True)
    try:
        metrics.clear_all()
        x = torch.ones(8, device="neuron")
        (x * 2).exp()
        x.normal_()  # no Neuron kernel on Trainium: a CPU fallback call
        calls = metrics.get_counter_value("Eager.OpCalls")
        assert calls >= 3 and metrics.get_counter_value("Eager.FallbackOpCalls") >= 1
        assert "Eager.OpSignatures" in metrics.get_counter_names()
        assert "Counter: Eager.OpCalls" in metrics.report()
        metrics.set_enabled(False)
        x * 3
        assert metrics.get_counter_value("Eager.OpCalls") == calls and not metrics.is_enabled()
        metrics.set_enabled(True)
        x * 3
        assert metrics.get_counter_value("Eager.OpCalls") == calls + 1
        metrics.clear_counters()
        assert not metrics.get_counter_names()
    finally:
        metrics.set_enabled(False)


def test_metric_tables_and_log_from_the_environment(tmp_path):
    from helpers import run_python

    code = """
import torch
x = torch.ones(4, device="neuron")
(x + x).normal_()
"""
    log_file = tmp_path / "neuron.log"
    out = run_python(code, env={"TORCH_NEURONX_METRICS_ENABLED": "1", "TORCH_NEURONX_ENABLED_METRIC_TABLES": "op_stats",
                                "TORCH_NEURONX_METRICS_DIR": str(tmp_path), "TORCH_NEURONX_LOG_LEVEL": "2",
                                "TORCH_NEURONX_LOG_FILE": str(log_file), "RANK": "3"})
    assert out.returncode == 0, out.stderr[-3000:]
    rows = (tmp_path / "metric_table_op_stats_rank3.csv").read_text().splitlines()
    assert rows[0] == "op,calls,signatures,runs_on"
    assert "aten::add.Tensor,1,1,neuron" in rows and "aten::normal_,1,1,cpu" in rows, rows
    assert "[Neuron] [INFO] wrote metric table op_stats" in log_file.read_text()
