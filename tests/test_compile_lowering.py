"""torch.compile(backend="neuron") lowers every graph to StableHLO as TorchNeuron does (compile/lowering.py):
artifacts, failures where Trainium fails (and the eager fallback), the cache, the interpreter check, the switch;
TorchNeuron's executor semantics (CPU inputs copied to the device, TORCH_NEURONX_RETAIN_DEVICE_MODE) and
compiled dropout drawn from the CPU generator (compile/random_ops.py); torch_neuronx.neuron_dynamo_backend.
"""

import glob

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx
from helpers import tiny_llama


@pytest.fixture(scope="module", autouse=True)
def neff_cache_dir(tmp_path_factory):
    """A fresh compile cache for this file, never the user's."""
    path = str(tmp_path_factory.mktemp("neff-cache"))
    mp = pytest.MonkeyPatch()
    mp.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", path)
    for name in ("TORCH_NEURONX_DISABLE_NEFF_CACHE", "TORCH_NEURONX_NEFF_CACHE_KEY_FILE", "TORCHNEURON_LOWERING",
                 "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS"):
        mp.delenv(name, raising=False)
    yield path
    mp.undo()


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def stats():
    return torch_neuronx.compile_stats()


def mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))


def train_step(model, x):
    out = torch.compile(model, backend="neuron")(x)
    out.pow(2).sum().backward()
    return out


def with_erfinv(x):
    y = x * 2
    return torch.erfinv(y.tanh() * 0.5) + 1  # erfinv: no StableHLO lowering in torch-mlir


# ------------------------------------------------------------------ artifacts

def test_artifacts_hold_the_fx_graph_and_stablehlo_of_forward_and_backward(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")
    from torch_neuronx.neuron_dynamo_backend import set_model_name
    set_model_name("TinyMLP")
    try:
        train_step(mlp().to("neuron"), torch.randn(4, 16, device="neuron"))
    finally:
        set_model_name("model_default")
    hlo = sorted(glob.glob(str(tmp_path / "stablehlo" / "proc_0" / "tinymlp_*.stablehlo.mlir")))
    fx = sorted(glob.glob(str(tmp_path / "fx_graphs" / "proc_0" / "tinymlp_*.fx.txt")))
    assert sorted(p.rsplit("_", 1)[1] for p in hlo) == ["backward.stablehlo.mlir", "forward.stablehlo.mlir"], hlo
    assert len(fx) == 2
    forward = open(next(p for p in hlo if p.endswith("forward.stablehlo.mlir"))).read()
    # the matmuls of both Linear layers as dot_general, the input a 4x16 f32 argument, no float64 left
    assert "func.func @main(" in forward and "tensor<4x16xf32>" in forward
    assert forward.count("stablehlo.dot_general") >= 2 and "f64" not in forward
    backward = open(next(p for p in hlo if p.endswith("backward.stablehlo.mlir"))).read()
    assert "stablehlo.dot_general" in backward
    assert stats()["graphs_lowered"] == 2


def test_artifacts_are_not_written_unless_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path / "debug"))
    with torch.no_grad():
        torch.compile(lambda x: x.sin() * 3, backend="neuron")(torch.randn(8, device="neuron"))
    assert stats()["graphs_lowered"] == 1
    assert not (tmp_path / "debug").exists()


# ------------------------------------------------------------------ failures as on Trainium

def test_graph_that_does_not_lower_fails_naming_the_op_the_line_and_the_fixes():
    with pytest.raises(Exception) as info:
        torch.compile(with_erfinv, backend="neuron")(torch.randn(8, 8, device="neuron"))
    message = str(info.value)
    assert "NeuronLoweringError" in message and "aten.erfinv does not lower to StableHLO" in message
    assert "test_compile_lowering.py" in message and "torch.erfinv(y.tanh() * 0.5)" in message  # the user's line
    assert "torch.compiler.disable" in message and "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0" in message
    assert "failed to legalize operation 'torch.aten.erfinv'" in message  # MLIR's diagnostic, not lost on fd 2
    error = info.value.inner_exception
    assert error.op == "aten.erfinv" and "test_compile_lowering.py" in error.location
    from torch_neuronx.compat.categories import failure_info  # what `torchneuron compat` records for it
    recorded = failure_info(info.value)
    assert recorded["category"] == "lowering" and recorded["op"] == "aten.erfinv"


@torch.library.custom_op("lowering_test::opaque_scale", mutates_args=())
def opaque_scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@opaque_scale.register_fake
def _opaque_scale_fake(x):
    return torch.empty_like(x)


@torch.library.custom_op("lowering_test::opaque_scale_", mutates_args={"x"})
def opaque_scale_(x: torch.Tensor) -> None:
    x.mul_(2)


@pytest.mark.parametrize("op", ["opaque_scale", "opaque_scale_"])
def test_custom_op_that_is_no_nki_kernel_does_not_lower(op):
    """A torch.library op has no StableHLO lowering (only NKI kernels and collectives become custom calls, as in
    TorchNeuron): it fails as on Trainium, named, also when it writes its input (inside auto_functionalized_v2)."""
    def f(x):
        y = x + 1
        if op == "opaque_scale":
            return opaque_scale(y)
        opaque_scale_(y)
        return y
    with pytest.raises(Exception) as info:
        torch.compile(f, backend="neuron", fullgraph=True)(torch.randn(8, device="neuron"))
    assert f"lowering_test.{op} does not lower to StableHLO" in str(info.value)
    assert info.value.inner_exception.op == f"lowering_test.{op}"


def test_graph_that_does_not_lower_runs_eagerly_when_fallback_execution_is_on(monkeypatch, caplog):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    x = torch.randn(8, 8)
    with caplog.at_level("WARNING", logger="torch_neuronx.compile"):
        out = torch.compile(with_erfinv, backend="neuron")(x.to("neuron"))
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), with_erfinv(x), rtol=1e-5, atol=1e-5)
    assert stats()["eager_graphs"] == [{"kind": "inference", "op": "aten.erfinv"}]
    assert any("aten.erfinv does not lower" in r.getMessage() and "running it eagerly" in r.getMessage()
               for r in caplog.records)


def test_switch_off_compiles_with_inductor_only(monkeypatch):
    monkeypatch.setenv("TORCHNEURON_LOWERING", "0")
    x = torch.randn(8, 8)
    out = torch.compile(with_erfinv, backend="neuron")(x.to("neuron"))
    torch.testing.assert_close(out.cpu(), with_erfinv(x), rtol=1e-5, atol=1e-5)
    assert stats()["graphs_lowered"] == 0 and stats()["neffs_built"] == 1
    monkeypatch.setenv("TORCHNEURON_LOWERING", "sometimes")
    torch._dynamo.reset()
    with pytest.raises(Exception, match="TORCHNEURON_LOWERING='sometimes' is not a valid value"):
        torch.compile(lambda x: x + 1, backend="neuron")(x.to("neuron"))


COLLECTIVES_SCRIPT = """
import torch, torch.distributed as dist
import torch.distributed._functional_collectives as funcol
dist.init_process_group("neuron", rank=0, world_size=1)
def f(x):
    return funcol.all_gather_tensor(funcol.all_reduce(x * 2, "sum", dist.group.WORLD), 0, dist.group.WORLD) + 1
x = torch.randn(4, 8, device="neuron")
assert torch.equal(torch.compile(f, backend="neuron", fullgraph=True)(x).cpu(), x.cpu() * 2 + 1)
print(torch_neuronx.compile_stats()["lowering_checks"])
dist.destroy_process_group()
"""


def test_collectives_lower_to_custom_calls_named_after_them(tmp_path):
    """Functional collectives in a compiled graph are custom calls named after the c10d op (TorchNeuron makes
    StableHLO collectives of them), typed with the local shapes, the rest lowered around them; the interpreter
    check skips the graph."""
    from helpers import run_python
    from test_distributed_launch import free_port
    r = run_python("import torch_neuronx\n" + COLLECTIVES_SCRIPT, env={
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "TORCH_NEURONX_DEBUG_DIR": str(tmp_path),
        "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS": "1", "TORCH_NEURONX_DISABLE_NEFF_CACHE": "1",
        "TORCHNEURON_LOWERING": "check"}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "'checked': False" in r.stdout and "_c10d_functional.all_reduce" in r.stdout, r.stdout
    [path] = glob.glob(str(tmp_path / "stablehlo" / "proc_0" / "*_inference.stablehlo.mlir"))
    stablehlo = open(path).read()
    assert 'stablehlo.custom_call @_c10d_functional.all_reduce(%' in stablehlo
    assert 'backend_config = "reduce_op=sum, group_name=0"} : (tensor<4x8xf32>) -> tensor<4x8xf32>' in stablehlo
    assert "stablehlo.custom_call @_c10d_functional.all_gather_into_tensor(" in stablehlo
    assert "stablehlo.multiply" in stablehlo and "stablehlo.add" in stablehlo and "wait_tensor" not in stablehlo


# ------------------------------------------------------------------ the cache

def test_warm_cache_lowers_nothing_again(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path / "debug"))
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    x = torch.randn(4, 16, device="neuron")
    train_step(mlp().to("neuron"), x)
    assert stats()["graphs_lowered"] == 2 and stats()["neffs_built"] == 2
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    train_step(mlp().to("neuron"), x)
    s = stats()
    assert s["cache_hits"] == 2 and s["neffs_built"] == 0 and s["graphs_lowered"] == 0
    # the StableHLO written from the cache entry: two of each, the same text
    written = sorted(glob.glob(str(tmp_path / "debug" / "stablehlo" / "proc_0" / "*forward.stablehlo.mlir")))
    assert len(written) == 2 and open(written[0]).read() == open(written[1]).read()


# ------------------------------------------------------------------ the interpreter check

@pytest.mark.slow
def test_interpreter_check_agrees_with_the_executed_tiny_llama_training_step(monkeypatch):
    """The StableHLO of the forward and backward graphs, run in StableHLO's reference interpreter, computes
    what the executed graphs compute (attention lowered as TorchNeuron's math decomposition)."""
    monkeypatch.setenv("TORCHNEURON_LOWERING", "check")
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")
    model = tiny_llama(hidden_size=32, intermediate_size=64, num_hidden_layers=1).to("neuron").train()
    ids = torch.randint(3, 256, (2, 16), generator=torch.Generator().manual_seed(0)).to("neuron")
    loss = torch.compile(model, backend="neuron")(input_ids=ids, labels=ids).loss
    loss.backward()
    checks = stats()["lowering_checks"]
    assert [c["kind"] for c in checks] == ["forward", "backward"] and all(c["checked"] for c in checks), checks
    assert all(c["max_abs_diff"] < 1e-4 for c in checks)


# ------------------------------------------------------------------ TorchNeuron's executor

def test_cpu_model_runs_on_device_copies_and_returns_device_tensors():
    model, x = mlp(), torch.randn(4, 16)
    with torch.no_grad():
        out = torch.compile(model, backend="neuron")(x)
        assert out.device.type == "neuron"
        torch.testing.assert_close(out.cpu(), model(x), rtol=1e-5, atol=1e-5)
    assert all(p.device.type == "cpu" for p in model.parameters())  # copies: the model stays where it is


def test_retain_device_mode_returns_outputs_on_the_inputs_device(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_RETAIN_DEVICE_MODE", "1")
    model, x = mlp(), torch.randn(4, 16)
    compiled = torch.compile(model, backend="neuron")
    with torch.no_grad():
        out = compiled(x)
        assert out.device.type == "cpu"
        torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)
        with pytest.raises(Exception, match="cannot mix input devices with TORCH_NEURONX_RETAIN_DEVICE_MODE=1, "
                                            "got cpu and neuron"):
            torch.compile(lambda a, b: (a * 2, b * 3), backend="neuron")(x, x.to("neuron"))


def test_disabled_cpu_autocopy_rejects_cpu_inputs(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", "1")
    with torch.no_grad(), pytest.raises(RuntimeError, match=r"Input tensor at index \d+ is on cpu device, expected "
                                                            r"neuron. Move tensor to Neuron device first with "
                                                            r"tensor.to\('neuron'\)"):
        torch.compile(mlp(), backend="neuron")(torch.randn(4, 16))


def test_cpu_model_with_dropout_draws_the_cpu_generators_masks():
    """Compiled dropout masks are drawn on the CPU (RandomOpLegalization): for a seed, the masks of CPU eager."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Dropout(0.3), torch.nn.ReLU(),
                                torch.nn.Linear(64, 8), torch.nn.Dropout(0.5)).train()
    x = torch.randn(32, 16)
    compiled = torch.compile(model, backend="neuron")
    with torch.no_grad():
        torch.manual_seed(7)
        out = compiled(x)
        again = compiled(x)
        torch.manual_seed(7)
        ref = model(x)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    assert not torch.equal(again.cpu(), out.cpu())  # new masks on each call


# ------------------------------------------------------------------ neuron_dynamo_backend

def test_neuron_dynamo_backend_helpers_write_the_graph_as_text_mlir_and_stablehlo(tmp_path):
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch_neuronx import neuron_dynamo_backend as ndb
    gm = make_fx(lambda x, w: F.gelu(x @ w).sum(-1))(torch.randn(4, 8), torch.randn(8, 3))
    saved = ndb.save_fx_graph_all_formats(gm, tmp_path / "g", save_stablehlo_mlir=True)
    assert set(saved) == {"txt", "raw_mlir", "stablehlo_mlir"}
    assert "torch.aten.mm" in saved["raw_mlir"].read_text()
    module = ndb.load_mlir(saved["stablehlo_mlir"])
    assert "stablehlo.dot_general" in str(module)
    assert ndb.get_rank() == torch.neuron.current_device()
    compiled = torch.compile(lambda x: x * 2, backend=ndb.create_neuron_backend())
    assert torch.equal(compiled(torch.ones(3, device="neuron")).cpu(), torch.full((3,), 2.0))
    assert ndb.get_dynamo_metrics()["graphs_compiled"] == 1


def test_ops_torchneuron_keeps_that_do_not_lower_fail_alone_in_torch_mlir():
    """The list of ops Inductor decomposes but TorchNeuron keeps (and torch-mlir cannot lower) is measured, not
    assumed: each, alone, fails to lower; max pooling's backward then fails to compile, as on Trainium."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch_neuronx.compile import decompositions, lowering
    aten = torch.ops.aten
    x, grad = torch.randn(1, 2, 8, 8), torch.randn(1, 2, 4, 4)
    indices = aten.max_pool2d_with_indices(x, [2, 2], [2, 2])[1]
    assert decompositions.KEPT_BY_TORCHNEURON_AND_NOT_LOWERED == {"aten.max_pool2d_with_indices_backward.default",
                                                                  "aten.max_pool3d_with_indices_backward.default"}
    gm = make_fx(lambda g, x, i: aten.max_pool2d_with_indices_backward(g, x, [2, 2], [2, 2], [0, 0], [1, 1], False, i),
                 tracing_mode="fake")(grad, x, indices)
    with pytest.raises(lowering._LoweringFailed):
        lowering.to_mlir(gm)
    x3 = torch.randn(1, 1, 4, 4, 4)
    gm3 = make_fx(lambda g, x, i: aten.max_pool3d_with_indices_backward(g, x, [2] * 3, [2] * 3, [0] * 3, [1] * 3, False, i),
                  tracing_mode="fake")(torch.randn(1, 1, 2, 2, 2), x3, aten.max_pool3d_with_indices(x3, [2] * 3, [2] * 3)[1])
    with pytest.raises(lowering._LoweringFailed):
        lowering.to_mlir(gm3)
    xn = torch.randn(1, 2, 8, 8, device="neuron", requires_grad=True)
    out = torch.compile(lambda t: F.max_pool2d(t, 2), backend="neuron")(xn)  # the forward lowers
    with pytest.raises(Exception, match="aten.max_pool2d_with_indices_backward does not lower to StableHLO"):
        out.sum().backward()


def test_convolution_backward_is_lowered_as_convolutions_that_compute_the_same_gradients():
    """TorchNeuron decomposes convolution_backward (torch-mlir has no lowering): the decomposition, checked
    against ATen's kernel (depthwise 1-d as Mamba's, strided grouped dilated 2-d), then a conv training step lowers."""
    from torch_neuronx.compile.decompositions import convolution_backward
    aten = torch.ops.aten
    for n, c_in, c_out, size, kernel, stride, pad, dil, groups in [(2, 8, 8, (10,), (4,), (1,), (3,), (1,), 8),
                                                                  (2, 4, 6, (9, 7), (3, 2), (2, 1), (1, 0), (1, 2), 2)]:
        x, w = torch.randn(n, c_in, *size, dtype=torch.float64), torch.randn(c_out, c_in // groups, *kernel,
                                                                             dtype=torch.float64)
        grad = torch.randn_like(aten.convolution(x, w, None, stride, pad, dil, False, [0] * len(size), groups))
        args = (grad, x, w, [c_out], list(stride), list(pad), list(dil), False, [0] * len(size), groups, [True] * 3)
        for mine, theirs in zip(convolution_backward(*args), aten.convolution_backward(*args)):
            torch.testing.assert_close(mine, theirs)
    conv = torch.nn.Conv1d(8, 8, 4, padding=3, groups=8).to("neuron")
    torch.compile(conv, backend="neuron")(torch.randn(2, 8, 10, device="neuron")).sum().backward()
    assert stats()["graphs_lowered"] == 2 and conv.weight.grad is not None
