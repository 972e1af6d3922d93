"""NKI kernels from PyTorch as TorchNeuron runs them: torch_neuronx.wrap_nki / nki_op, kernels called directly
with `neuron` tensors, in-place outputs, autograd, torch.compile(backend="neuron", fullgraph=True) with the kernel
as one graph node, the profiler and statistics, strict memory, `import nki` aliasing, and torchrun.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
import neuronxcc.nki as bnki
import neuronxcc.nki.language as bnl
import neuronxcc.nki.typing as nt
import torch_neuronx
import torch_neuronx.nki as tnki
from torch_neuronx import nki_op, wrap_nki

from helpers import run_python

DEV = "neuron"


@nki.jit
def scaled_add(a, b, scale):
    """out = a * scale + b, one [rows <= 128, cols] tile per program of the grid's first axis."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows = a.shape[0] // nl.num_programs()
    i = nl.program_id(0)
    ta = nl.load(a[i * rows:(i + 1) * rows, :])
    tb = nl.load(b[i * rows:(i + 1) * rows, :])
    t = nl.ndarray(ta.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=t, data=ta, op0=nl.multiply, operand0=scale)
    o = nl.ndarray(ta.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=o, data1=t, data2=tb, op=nl.add)
    nl.store(out[i * rows:(i + 1) * rows, :], o)
    return out


def test_kernel_called_directly_and_through_wrap_nki():
    a, b = torch.randn(256, 64), torch.randn(256, 64)
    da, db = a.to(DEV), b.to(DEV)
    out = scaled_add(da[:128], db[:128], 0.5)   # one program: 128 rows (views are made contiguous)
    assert out.device == da.device
    torch.testing.assert_close(out.cpu(), a[:128] * 0.5 + b[:128])
    torch.testing.assert_close(wrap_nki(scaled_add)[2](da, db, scale=2.0).cpu(), a * 2.0 + b)  # two programs
    torch.testing.assert_close(da.cpu(), a)  # inputs untouched
    torch.testing.assert_close(scaled_add[2](a, b, 0.5), a * 0.5 + b)  # CPU tensors run on the emulated core too


def test_tensors_on_two_devices_are_rejected():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        scaled_add(torch.randn(128, 4, device=DEV), torch.randn(128, 4), 1.0)


@bnki.jit
def add_kernel_mut(x1, x2, y: nt.mutable_tensor):
    """The real TorchNeuron's in-place test kernel (beta 1)."""
    x1_tile = bnl.load(x1[0:128])
    x2_tile = bnl.load(x2[0:128])
    y_tile = x1_tile + x2_tile
    bnl.store(y[0:128], value=y_tile)
    return y


@nki_op("nki_test::add_", mutates_args={"y"})
def add_(x1: torch.Tensor, x2: torch.Tensor, y: torch.Tensor) -> None:
    wrap_nki(add_kernel_mut)(x1, x2, y)


@nki.jit
def add_into_out(x, y, out):
    """NKI 0.3+: the kernel writes a preallocated output parameter."""
    tx, ty = nl.load(x), nl.load(y)
    nl.store(out, nl.add(tx, ty))


@nki_op("nki_test::add_out", mutates_args=())
def add_out(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    add_into_out(x, y, out)
    return out


def test_in_place_outputs():
    x1, x2, y = torch.randn(128, device=DEV), torch.randn(128, device=DEV), torch.zeros(128, device=DEV)
    v = y._version
    add_(x1, x2, y)
    assert y._version > v   # autograd sees the write
    torch.testing.assert_close(y.cpu(), (x1 + x2).cpu())
    out = torch.zeros(128, 16, device=DEV)
    x, z = torch.randn(128, 16, device=DEV), torch.randn(128, 16, device=DEV)
    add_into_out(x, z, out)
    torch.testing.assert_close(out.cpu(), (x + z).cpu())
    torch.testing.assert_close(add_out(x, z).cpu(), (x + z).cpu())


@nki.jit
def square_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, nl.multiply(t, t))
    return out


@nki_op("nki_test::square", mutates_args=())
def square(x: torch.Tensor) -> torch.Tensor:
    return square_kernel(x)


def _square_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * 2 * x


square.register_autograd(_square_backward, setup_context=lambda ctx, inputs, output: ctx.save_for_backward(*inputs))


def test_nki_op_autograd_matches_cpu():
    x = torch.randn(128, 32, requires_grad=True)
    xd = x.detach().to(DEV).requires_grad_()
    (square(xd) * 3).sum().backward()
    (x * x * 3).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


def test_launch_with_grad_outside_nki_op_says_how_to_train():
    x = torch.randn(128, 32, device=DEV, requires_grad=True)
    with pytest.raises(RuntimeError, match="wrap the launch in torch_neuronx.nki_op"):
        square_kernel(x)
    with torch.no_grad():
        torch.testing.assert_close(square_kernel(x).cpu(), (x * x).detach().cpu())


def _call_kernel_nodes(gm) -> list:
    return [n for n in gm.graph.nodes if n.op == "call_function" and "call_kernel" in str(n.target)]


def test_compiled_kernel_is_one_graph_node():
    def f(a, b):
        return scaled_add(torch.relu(a) * 2, b, 0.25) + 1

    a, b = torch.randn(128, 64, device=DEV), torch.randn(128, 64, device=DEV)
    explanation = torch._dynamo.explain(f)(a, b)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0, explanation
    assert len(_call_kernel_nodes(explanation.graphs[0])) == 1
    compiled = torch.compile(f, backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(a, b).cpu(), f(a, b).cpu())


_CUSTOM_CALL = re.compile(r'stablehlo\.custom_call @(\w+)\(([^)]*)\) \{(.*)\} : \(([^)]*)\) -> (.+)$')


def _nki_custom_calls(stablehlo: str) -> dict:
    """func_name -> (operand types, result types, aliased operand indices, decoded backend_config) of each
    custom call of the module."""
    calls = {}
    for line in stablehlo.splitlines():
        match = _CUSTOM_CALL.search(line.strip())
        if match:
            target, _, attributes, operands, results = match.groups()
            assert target == "AwsNeuronCustomNativeKernel", line
            config = json.loads(base64.b64decode(re.search(r'backend_config = "([^"]*)"', attributes).group(1)))
            aliases = [int(i) for i in re.findall(r"operand_index = (\d+)", attributes)]
            calls[config["func_name"]] = (operands.split(", "), results, aliases, config)
    return calls


def test_compiled_kernels_lower_to_custom_calls_that_carry_them(tmp_path, monkeypatch):
    """In the StableHLO of a compiled graph each kernel launch (also those inside an nki_op, which is traced
    through) is TorchNeuron's custom call AwsNeuronCustomNativeKernel (a base64 JSON backend_config naming the
    kernel), its operands and results typed, each input it writes aliased (a parameter, a slice of a graph input
    written back into it); the rest of the graph lowers around them; the interpreter check skips such a graph,
    naming why."""
    from torch_neuronx.neuron_dynamo_backend import load_mlir
    for name, value in (("TORCH_NEURONX_DEBUG_DIR", str(tmp_path)), ("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1"),
                        ("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1"), ("TORCHNEURON_LOWERING", "check")):
        monkeypatch.setenv(name, value)

    def f(a, b, c, d, out, x, buf, s):
        add_into_out(c, d, out)              # writes its parameter `out`, a graph input
        add_(x, x, buf[128:])                # an nki_op writing a slice of a graph input
        return scaled_add[2](torch.relu(a), b, 0.5) * 2, square(s)

    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    cpu = [torch.randn(256, 64), torch.randn(256, 64), torch.randn(128, 64), torch.randn(128, 64),
           torch.zeros(128, 64), torch.randn(128), torch.zeros(256), torch.randn(128, 16)]
    dev = [t.to(DEV) for t in cpu]
    got = torch.compile(f, backend="neuron", fullgraph=True)(*dev)
    torch.testing.assert_close(got[0].cpu(), (cpu[0].relu() * 0.5 + cpu[1]) * 2)
    torch.testing.assert_close(got[1].cpu(), cpu[7] * cpu[7])
    torch.testing.assert_close(dev[4].cpu(), cpu[2] + cpu[3])
    torch.testing.assert_close(dev[6].cpu(), torch.cat([torch.zeros(128), cpu[5] * 2]))

    [path] = (tmp_path / "stablehlo" / "proc_0").glob("*_inference.stablehlo.mlir")
    stablehlo = path.read_text()
    load_mlir(path).operation.verify()
    calls = _nki_custom_calls(stablehlo)
    assert sorted(calls) == ["add_into_out", "add_kernel_mut", "scaled_add", "square_kernel"], stablehlo
    f32 = "tensor<{}xf32>".format
    operands, results, aliases, config = calls["scaled_add"]
    assert operands == [f32("256x64")] * 2 and results == f32("256x64") and aliases == []
    assert config["grid"] == [2] and config["input_names"] == ["a", "b"] and config["constants"] == {"scale": 0.5}
    operands, results, aliases, config = calls["add_into_out"]
    assert operands == [f32("128x64")] * 3 and results == f32("128x64") and aliases == [2]
    assert config["input_names"] == ["x", "y", "out"] and config["output_names"] == ["out"]
    operands, results, aliases, config = calls["add_kernel_mut"]
    assert operands == [f32("128")] * 3 and results == f32("128") and aliases == [2]
    assert calls["square_kernel"][0] == [f32("128x16")]
    assert "stablehlo.maximum" in stablehlo  # the relu, lowered as any op
    [check] = torch_neuronx.compile_stats()["lowering_checks"]
    assert not check["checked"] and "AwsNeuronCustomNativeKernel" in check["why"], check


def test_launch_plan_is_a_dynamo_constant_without_importing_dynamo():
    """integrations/dynamo_constant_result.py: torch's decorator still only sets the attribute the shim sets."""
    import torch._dynamo
    from torch_neuronx.nki import torch_glue

    def f():
        return 0
    assert torch._dynamo.assume_constant_result(f) is f and vars(f) == {"_dynamo_marked_constant": True}
    assert torch_glue._plan_id._dynamo_marked_constant and torch_glue._plan_layout._dynamo_marked_constant
    r = run_python("import sys, torch, nki; print('torch._dynamo' in sys.modules)")
    assert r.stdout.strip() == "False", r.stderr[-2000:]


def test_kernel_errors_surface_unchanged_under_compile():
    compiled = torch.compile(lambda p: scaled_add(p, p, 1.0), backend="neuron", fullgraph=True)
    with pytest.raises(tnki.NkiError, match="number of partitions 256 exceed") as info:
        compiled(torch.randn(256, 8, device=DEV))   # one program for 256 rows: the dry run at trace time
    assert info.value.rule == "err_num_partition_exceed_arch_limit"


def test_compiled_training_with_nki_op_and_in_place():
    def step(x, w, y):
        loss = square(x @ w).mean()
        add_(y, y, y)   # in place, under functionalization
        return loss

    x, w = torch.randn(128, 16), torch.randn(16, 16, requires_grad=True)
    wd = w.detach().to(DEV).requires_grad_()
    y, yd = torch.ones(128), torch.ones(128, device=DEV)
    compiled = torch.compile(step, backend="neuron", fullgraph=True)
    loss = compiled(x.to(DEV), wd, yd)
    loss.backward()
    ref = ((x @ w) ** 2).mean()
    ref.backward()
    torch.testing.assert_close(loss.cpu(), ref.detach())
    torch.testing.assert_close(wd.grad.cpu(), w.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(yd.cpu(), y * 2)


def test_statistics_count_instructions_per_engine():
    tnki.reset_statistics()
    a, b = torch.randn(256, 64, device=DEV), torch.randn(256, 64, device=DEV)
    scaled_add[2](a, b, 1.0)
    stats = tnki.statistics()["scaled_add"]
    # per program: 2 loads + 1 store (DMA), tensor_scalar + tensor_tensor (VectorE); two programs
    assert stats.calls == 1 and stats.instructions == {"TensorE": 0, "VectorE": 4, "ScalarE": 0, "GpSimd": 0,
                                                       "DMA": 6}
    assert stats.generation == "NeuronCore-v3" and 0 < stats.estimated_s < 1e-3
    assert "estimate" in str(stats)


def test_profiler_shows_the_kernel_and_its_estimate():
    from torch.profiler import ProfilerActivity, profile
    a, b = torch.randn(128, 64, device=DEV), torch.randn(128, 64, device=DEV)
    scaled_add(a, b, 1.0)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        scaled_add(a, b, 1.0)
    names = [e.key for e in prof.key_averages()]
    assert any(n.startswith("nki scaled_add [estimate") and "VectorE 2" in n for n in names), names
    kernel = [e for e in prof.key_averages() if e.key == "nki::call_kernel"]
    assert kernel and kernel[0].self_device_time_total > 0


STRICT_SCRIPT = """
import sys
sys.path.insert(0, "tests")
import torch, nki, nki.language as nl
from test_nki_torch import scaled_add, square, add_
a, b = torch.randn(128, 64), torch.randn(128, 64)
assert torch.allclose(scaled_add(a.to("neuron"), b.to("neuron"), 0.5).cpu(), a * 0.5 + b)
x = torch.randn(128, 8, device="neuron", requires_grad=True)
square(x).sum().backward()
assert torch.allclose(x.grad.cpu(), 2 * x.detach().cpu())
y = torch.ones(128, device="neuron")
add_(y, y, y)
c = torch.compile(lambda p, q: scaled_add(p, q, 2.0) * 3, backend="neuron", fullgraph=True)
assert torch.allclose(c(a.to("neuron"), b.to("neuron")).cpu(), (a * 2 + b) * 3)
print("ok", y.cpu()[0].item())
"""


def test_kernels_reach_device_memory_only_through_the_host_bridge():
    r = run_python(STRICT_SCRIPT, env={"TORCHNEURON_STRICT_MEMORY": "1"}, timeout=300)
    assert r.returncode == 0 and "ok 2.0" in r.stdout, r.stderr[-3000:]


INSTANCE_SCRIPT = """
import sys
sys.path.insert(0, "tests")
import torch, nki, nki.language as nl
import torch_neuronx
import torch_neuronx.nki as tnki
from test_nki_torch import scaled_add
a = torch.randn(128, 8, device="neuron")
scaled_add(a, a, 1.0)
print(tnki.statistics()["scaled_add"].generation, nl.tile_size.sbuf_fmax_bytes)
try:
    scaled_add[2](a, a, 1.0)
except tnki.NkiError as e:
    print(e.rule)
"""


@pytest.mark.parametrize("instance,expect", [("trn1.2xlarge", "NeuronCore-v2 196608 err_lnc_launch"),
                                             ("trn3-gen2", "NeuronCore-v4 262144")])
def test_generation_follows_the_emulated_instance(instance, expect):
    r = run_python(INSTANCE_SCRIPT, env={"TORCHNEURON_INSTANCE": instance}, timeout=300)
    assert r.returncode == 0 and r.stdout.split() == expect.split(), r.stdout + r.stderr[-3000:]


IMPORT_BEFORE_TORCH = """
import sys
import nki, nki.language as nl, nki.isa as nisa
import neuronxcc.nki.language as bnl
assert "torch" in sys.modules  # the emulation loads torch when nki is imported
import numpy as np

@nki.jit
def k(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(nl.load(x)))
    return out

x = np.zeros((4, 4), np.float32)
print(nki.__name__, bnl.__name__, float(k(x)[0, 0]))
"""


def test_import_nki_first_resolves_to_the_emulation():
    r = subprocess.run([sys.executable, "-c", IMPORT_BEFORE_TORCH], capture_output=True, text=True, cwd="/",
                       timeout=300, env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["torch_neuronx.nki", "torch_neuronx.nki.legacy.language", "1.0"]


def test_an_installed_nki_package_wins(tmp_path):
    real = tmp_path / "real" / "nki"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("WHO = 'aws'\n")
    placeholder = tmp_path / "placeholder" / "nki"
    placeholder.mkdir(parents=True)
    (placeholder / "__init__.py").write_text(
        "raise ImportError('WRONG PACKAGE. Please install the package from Neuron Repository')\n")
    code = "import torch, nki; print(getattr(nki, 'WHO', nki.__name__))"
    for path, expect in ((real.parent, "aws"), (placeholder.parent, "torch_neuronx.nki")):
        env = dict(os.environ, PYTHONPATH=str(path))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", env=env,
                           timeout=300)
        assert r.returncode == 0 and r.stdout.strip() == expect, (path, r.stdout, r.stderr[-2000:])


def test_unknown_nki_modules_name_what_is_emulated():
    with pytest.raises(ModuleNotFoundError, match="torch_neuronx emulates"):
        import nki.collectives  # noqa: F401


@pytest.mark.slow
def test_kernels_under_torchrun_per_rank():
    from test_distributed_launch import torchrun
    r = torchrun("test_nki_torch.py", 2, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.count("nki rank ok") == 2, r.stdout


def _torchrun_worker() -> None:
    """Each rank runs the kernel on its own NeuronCore, eager and compiled; the sum over ranks is checked."""
    import torch.distributed as dist
    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
    torch.manual_seed(rank)
    a, b = torch.randn(256, 32), torch.randn(256, 32)
    out = scaled_add[2](a.to(device), b.to(device), 3.0)
    assert out.device == device
    compiled = torch.compile(lambda p, q: scaled_add[2](p, q, 3.0), backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(a.to(device), b.to(device)), out)
    dist.all_reduce(out)
    expect = torch.zeros(256, 32)
    for r in range(world):
        torch.manual_seed(r)
        x, y = torch.randn(256, 32), torch.randn(256, 32)
        expect += x * 3.0 + y
    torch.testing.assert_close(out.cpu(), expect)
    assert tnki.statistics()["scaled_add"].calls == 2
    print("nki rank ok", rank, flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    _torchrun_worker()
