"""Neuron's documented dtype and op rules (docs/fidelity.md, ../shared/trainium-facts.md), one test per
rule: what is wrong or unsupported on Trainium fails here first, at the op, with the fix."""

import os
import subprocess
import sys
import warnings

import pytest
import torch

import torch_neuronx
from torch_neuronx import dtypes

DEV = "neuron"
INT32_MAX = 2**31 - 1


@pytest.fixture
def int64_mode():
    yield dtypes.set_int64_mode
    dtypes.set_int64_mode(dtypes.DEFAULT_INT64)


@pytest.fixture
def fp64_mode():
    yield dtypes.set_fp64_mode
    dtypes.set_fp64_mode(dtypes.DEFAULT_FP64)


# --- int64: Neuron stores int64 as int32 ------------------------------------------------------------

def test_int64_result_outside_int32_raises_at_the_op_under_error(int64_mode):
    int64_mode("error")
    with pytest.raises(RuntimeError, match=r"aten::random_.*int64 result.*int32.*TORCHNEURON_INT64=exact"):
        torch.randint(0, 2**40, (64,), device=DEV)
    x = torch.full((4,), 2**20, dtype=torch.int64, device=DEV)
    with pytest.raises(RuntimeError, match=r"aten::mul.*1099511627776"):
        x * 2**20  # the hot elementwise kernels apply the rule too
    with pytest.raises(RuntimeError, match=r"to neuron.*int32"):
        torch.tensor([2**33]).to(DEV)


def test_int64_in_int32_range_is_exact_and_silent():
    ids = torch.randint(0, 50_000, (4, 128))
    mask = torch.ones(4, 128, dtype=torch.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d_ids, d_mask = ids.to(DEV), mask.to(DEV)
        pos = d_mask.cumsum(-1) - 1
        assert torch.equal(pos.cpu(), mask.cumsum(-1) - 1)
        assert torch.equal((d_ids * 3 + pos).cpu(), ids * 3 + mask.cumsum(-1) - 1)
        assert torch.equal(torch.arange(INT32_MAX - 3, INT32_MAX + 1, device=DEV).cpu(),
                           torch.arange(INT32_MAX - 3, INT32_MAX + 1))


@pytest.mark.parametrize("case", ["mm", "sum", "cumsum", "scatter_add", "index_add"])
def test_integer_fp32_datapath_result_beyond_2_24_raises_under_error(int64_mode, case):
    int64_mode("error")
    big = 2**13  # 2^13 * 2^12 = 2^25 > 2^24
    ops = {
        "mm": lambda d: torch.full((2, 2**12), big, dtype=torch.int32, device=d) @
                        torch.ones(2**12, 2, dtype=torch.int32, device=d),
        "sum": lambda d: torch.full((2**12,), big, dtype=torch.int64, device=d).sum(),
        "cumsum": lambda d: torch.full((2**12,), big, dtype=torch.int64, device=d).cumsum(0),
        "scatter_add": lambda d: torch.zeros(1, dtype=torch.int64, device=d).scatter_add(
            0, torch.zeros(2**12, dtype=torch.int64, device=d), torch.full((2**12,), big, dtype=torch.int64, device=d)),
        "index_add": lambda d: torch.zeros(1, dtype=torch.int64, device=d).index_add(
            0, torch.zeros(2**12, dtype=torch.int64, device=d), torch.full((2**12,), big, dtype=torch.int64, device=d)),
    }
    with pytest.raises(RuntimeError, match=rf"aten::{case}.*{2**25}.*2\^24"):
        ops[case](DEV)


def test_integer_fp32_datapath_within_2_24_is_exact():
    a = torch.randint(-100, 100, (8, 16), dtype=torch.int32)
    b = torch.randint(-100, 100, (16, 4), dtype=torch.int32)
    assert torch.equal((a.to(DEV) @ b.to(DEV)).cpu(), a @ b)
    assert torch.equal(a.to(DEV).sum().cpu(), a.sum())


def test_int64_default_warns_at_the_op_and_keeps_a_discarded_value_harmless(int64_mode):
    # T5's relative-position buckets (Transformers' T5Attention._relative_position_bucket): log(0) = -inf
    # cast to int64 is INT64_MIN on the host (truncated on Neuron), and torch.where throws it away. T5 runs
    # on Trainium, so the default must not stop it: it warns at the op and the result equals CPU's.
    assert dtypes.DEFAULT_INT64 == "warn"
    int64_mode("warn")  # setting the mode counts the once-per-op warnings afresh
    def buckets(rel):
        small = rel < 8
        large = 8 + (torch.log(rel.float() / 8) / torch.log(torch.tensor(16.0, device=rel.device)) * 8).to(torch.long)
        large = torch.min(large, torch.full_like(large, 15))
        return torch.where(small, rel, large)
    rel = torch.arange(0, 40).view(1, -1)
    with pytest.warns(UserWarning, match=r"-9223372036854775808 in an int64 result.*TORCHNEURON_INT64=error"):
        on_neuron = buckets(rel.to(DEV)).cpu()
    assert torch.equal(on_neuron, buckets(rel))


def test_t5_encoder_runs_on_neuron_as_on_cpu():
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                   relative_attention_num_buckets=8, relative_attention_max_distance=16)
    torch.manual_seed(0)
    model = transformers.T5EncoderModel(config).eval()
    ids = torch.randint(0, 64, (2, 24))
    with torch.no_grad():
        expected = model(input_ids=ids).last_hidden_state
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the int64 rule's warning at the bucket cast (test above)
            got = model.to(DEV)(input_ids=ids.to(DEV)).last_hidden_state.cpu()
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_int64_switch_exact_and_warn(int64_mode):
    int64_mode("exact")
    assert torch.full((3,), 2**40, device=DEV).sum().item() == 3 * 2**40
    int64_mode("warn")
    with pytest.warns(UserWarning, match="aten::sum.*2\\^24"):
        s = torch.full((3,), 2**40, device=DEV).sum()
    assert s.item() == 3 * 2**40  # warn keeps host values
    with pytest.raises(ValueError, match="int64 mode"):
        int64_mode("sometimes")


def test_integer_all_reduce_beyond_2_24_raises_in_c10d(tmp_path):
    import torch.distributed as dist
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("neuron", store=store, rank=0, world_size=1)
    try:
        ok = torch.full((4,), 1000, dtype=torch.int64, device=DEV)
        dist.all_reduce(ok)
        assert ok.cpu().tolist() == [1000] * 4
        big = torch.full((4,), 2**25, dtype=torch.int64, device=DEV)
        dtypes.set_int64_mode("error")
        with pytest.raises(Exception, match=r"all_reduce.*2\^24"):
            dist.all_reduce(big)
    finally:
        dtypes.set_int64_mode(dtypes.DEFAULT_INT64)
        dist.destroy_process_group()


# --- float64: Neuron computes float64 in float32; copies keep their bytes --------------------------------

def test_fp64_default_computes_in_float32_precision_and_copies_keep_bytes():
    third = torch.tensor([1 / 3], dtype=torch.float64)
    d = third.to(DEV)                                        # a copy keeps the bytes, as on TorchNeuron
    assert d.dtype == torch.float64 and d.cpu().item() == 1 / 3 and d.item() == 1 / 3
    assert torch.tensor([3.14], dtype=torch.float64, device=DEV).item() == 3.14
    assert torch.equal(d.clone().cpu(), third) and torch.equal(d.to(torch.float64).cpu(), third)
    r = torch.ones(1, dtype=torch.float64, device=DEV) / 3  # an op's result has float32 precision
    assert r.cpu().item() == third.float().double().item() != 1 / 3
    assert (d * 1).cpu().item() == third.float().double().item()
    # Inputs and Python scalars enter an op at float32 precision too: comparisons agree with Trainium's.
    assert (torch.full((2, 3), 3.14, dtype=torch.float64, device=DEV) == 3.14).all()
    assert (d == 1 / 3).item() and d.cpu().item() == 1 / 3      # the compare did not round d's own bytes
    assert d.view(1, 1).data_ptr() == d.data_ptr()             # views still see their base


def test_fp64_switches(fp64_mode):
    fp64_mode("exact")
    assert (torch.ones(1, dtype=torch.float64, device=DEV) / 3).cpu().item() == 1 / 3
    fp64_mode("error")
    with pytest.raises(RuntimeError, match="float64 is not supported by NeuronCores"):
        torch.ones(1, dtype=torch.float64, device=DEV).exp()
    with pytest.warns(DeprecationWarning, match="'allow' is deprecated"):
        fp64_mode("allow")
    assert (torch.ones(1, dtype=torch.float64, device=DEV) / 3).cpu().item() == 1 / 3


# --- bf16 stochastic rounding (NEURON_RT_STOCHASTIC_ROUNDING_EN) -------------------------------------

@pytest.fixture
def stochastic_rounding():
    dtypes.set_stochastic_rounding(True)
    yield
    dtypes.set_stochastic_rounding(False)


def _fractions(x: torch.Tensor, lower: float, spacing: float) -> torch.Tensor:
    return (x.to(torch.bfloat16).cpu().float() - lower) / spacing


def test_stochastic_rounding_mean_is_the_fraction(stochastic_rounding):
    spacing = 2.0**-7  # bf16 spacing in [1, 2)
    for frac in (0.25, 0.5, 0.9):
        for sign in (1, -1):
            x = torch.full((200_000,), sign * (1 + frac * spacing), device=DEV)
            steps = _fractions(x, sign * 1.0, sign * spacing)
            assert set(steps.unique().tolist()) <= {0.0, 1.0}  # only the two neighbours
            assert abs(steps.mean().item() - frac) < 0.01
    exact = torch.tensor([1.0, -2.5, float("inf"), 0.0], device=DEV)
    assert torch.equal(exact.to(torch.bfloat16).cpu(), exact.cpu().to(torch.bfloat16))
    assert torch.isnan(torch.tensor([float("nan")], device=DEV).to(torch.bfloat16).cpu()).all()


def test_stochastic_rounding_is_reproducible_from_the_seed(stochastic_rounding):
    x = torch.full((10_000,), 1 + 0.5 * 2.0**-7, device=DEV)
    torch.manual_seed(7)
    a = x.to(torch.bfloat16).cpu()
    torch.neuron.manual_seed(7)
    b = x.to(torch.bfloat16).cpu()
    torch.manual_seed(8)
    c = x.to(torch.bfloat16).cpu()
    assert torch.equal(a, b) and not torch.equal(a, c)
    with torch.autocast(DEV, dtype=torch.bfloat16):  # autocast's casts of fp32 weights round the same way
        w = torch.full((64, 64), 1 + 0.5 * 2.0**-7, device=DEV)
        y = torch.ones(1, 64, device=DEV) @ w
    assert y.dtype == torch.bfloat16 and not torch.all(y == y[0, 0])


def test_round_to_nearest_without_stochastic_rounding():
    x = torch.full((1000,), 1 + 0.25 * 2.0**-7, device=DEV)
    assert torch.equal(x.to(torch.bfloat16).cpu(), x.cpu().to(torch.bfloat16))


# --- names users type ------------------------------------------------------------------------------

def test_amp_supported_dtypes_and_op_tracking_names():
    assert torch.neuron.get_amp_supported_dtype() == [torch.float32, torch.float16, torch.bfloat16]
    torch.ones(2, device=DEV).exp()
    assert torch_neuronx.get_executed_ops()
    torch_neuronx.clear_op_tracking()
    assert not torch_neuronx.get_executed_ops() and not torch_neuronx.get_op_signature_counts()
    with pytest.warns(DeprecationWarning, match="clear_op_tracking"):
        torch_neuronx.reset_op_counts()


def test_each_op_call_counted_once_whichever_path_runs_it():
    x, h = torch.ones(4, device=DEV), torch.ones(4, dtype=torch.float16, device=DEV)
    torch_neuronx.clear_op_tracking()
    x + x  # a host kernel
    x + h  # mixed dtypes: the host kernel hands the call to the boxed fallback
    x.sum(0)  # the boxed fallback
    ops = torch_neuronx.get_op_counts()
    assert ops["aten::add.Tensor"] == 2 and ops["aten::sum.dim_IntList"] == 1, ops
    assert torch_neuronx.get_op_signature_counts()["aten::add.Tensor"] == 2


# --- op tracking: what Trainium runs on the NeuronCore and on the CPU ---------------------------------

def test_op_tracking_classifies_as_the_real_plugin_records():
    torch_neuronx.clear_op_tracking()
    x = torch.randn(8, 8, device=DEV)  # empty (a Neuron kernel) + normal_ (no Neuron kernel: the CPU)
    w = torch.randn(4, 8, device=DEV)
    y = (x @ x + x).relu()
    y.sqrt_()  # in-place: reaches the registered sqrt.out on Trainium, reported under that name
    torch.linalg.qr(x)
    fallback, executed = torch_neuronx.get_fallback_ops(), torch_neuronx.get_executed_ops()
    assert isinstance(fallback, list) and isinstance(executed, list)
    assert {"aten::normal_", "aten::linalg_qr"} <= set(fallback), fallback
    assert {"aten::empty", "aten::mm", "aten::add.Tensor", "aten::relu", "aten::sqrt.out"} <= set(executed), executed
    assert "aten::sqrt_" not in executed and not set(fallback) & set(executed)
    # Composite ops the real plugin registers are one Neuron kernel, recorded as themselves, also under
    # inference_mode (no autograd key); allocation and copy ops as its C++ kernels record them; views not.
    torch_neuronx.clear_op_tracking()
    torch.nn.functional.linear(x, w)
    x.clone()
    y.sum().item()
    x.view(64).t().unsqueeze(0)
    x.cpu()
    with torch.inference_mode():
        torch.nn.functional.embedding(torch.tensor([1, 2], device=DEV), w)
    executed = set(torch_neuronx.get_executed_ops())
    assert {"aten::linear", "aten::clone", "aten::_local_scalar_dense", "aten::_to_copy",
            "aten::embedding"} <= executed, executed
    assert not {"aten::addmm", "aten::t", "aten::view", "aten::unsqueeze", "aten::index_select"} & executed, executed
    assert not torch_neuronx.get_fallback_ops()
    # Ops TorchNeuron runs as one kernel that are composed of other ops here: recorded as themselves.
    torch_neuronx.clear_op_tracking()
    torch.ops.aten.linear_backward(x, torch.randn(8, 4, device=DEV), w, [True, True, True])
    torch.batch_norm_stats(x.view(2, 4, 8), 1e-5)
    executed = set(torch_neuronx.get_executed_ops())
    assert {"aten::linear_backward", "aten::batch_norm_stats"} <= executed, executed
    assert not {"aten::mm", "aten::sum.dim_IntList", "aten::rsqrt"} & executed, executed
    # Copies are logged by TorchNeuron's C++ copy kernel on every call, also inside _to_copy.
    torch_neuronx.clear_op_tracking()
    torch.ones(3).to(DEV)
    assert {"aten::_to_copy", "aten::copy_"} <= set(torch_neuronx.get_executed_ops())
    # The emulator's own path, kept apart: qr took its generic host path, mm its dedicated kernel.
    torch.linalg.qr(x)
    x @ x
    emulator = torch_neuronx.get_emulator_op_counts()
    assert "aten::linalg_qr" in emulator and "aten::mm" not in emulator, emulator


@pytest.mark.parametrize("inference", [False, True], ids=["autograd", "inference_mode"])
def test_composite_ops_recorded_as_themselves_through_unboxed_kernels(inference):
    # Each composite overload TorchNeuron registers has an unboxed recording kernel (UnboxedComposites.cpp:
    # a boxed one costs every call, docs/runtime.md); an overload a new torch adds needs its line there.
    assert torch_neuronx._C._boxed_composite_recorders() == []
    cpu = torch.randn(4, 4)
    results = {}
    for device in ("cpu", DEV):
        x = cpu.to(device).requires_grad_(not inference)
        torch_neuronx.clear_op_tracking()
        with torch.inference_mode(inference):
            scaled = torch.ops.aten.mul.Scalar(x, 2.0).sum()  # explicit composites: mul.Scalar, sum
            stacked = torch.stack([x, x]).transpose(0, 1).contiguous()  # stack (explicit), contiguous (implicit)
            acc = [torch.zeros(4, device=device)]  # zeros (a factory op)
            torch._foreach_add_(acc, 1.5)  # _foreach_add_.Scalar (explicit, returns nothing)
            ones = torch.ones_like(x)
            normed = torch.nn.functional.rms_norm(x, (4,))  # rms_norm: records its part (_fused_rms_norm) too
        results[device] = (scaled, stacked, acc[0], ones, normed)
    for got, want in zip(results[DEV], results["cpu"]):
        torch.testing.assert_close(got.cpu(), want)
    executed = set(torch_neuronx.get_executed_ops())
    assert {"aten::mul.Scalar", "aten::sum", "aten::stack", "aten::contiguous", "aten::zeros",
            "aten::_foreach_add_.Scalar", "aten::ones_like", "aten::rms_norm", "aten::_fused_rms_norm"} <= executed, executed
    # Their parts here (mul.Scalar's mul.Tensor, sum's sum.dim_IntList, stack's cat, ...) are not Trainium's ops.
    assert not {"aten::mul.Tensor", "aten::sum.dim_IntList", "aten::cat", "aten::add_.Scalar", "aten::add_.Tensor",
                "aten::fill_.Scalar"} & executed, executed
    assert not torch_neuronx.get_fallback_ops()


def test_cpu_fallback_error_rejects_what_trainium_runs_on_cpu():
    torch_neuronx._C._set_cpu_fallback_allowed(False)
    try:
        x = torch.ones(8, 8, device=DEV)
        with pytest.raises(NotImplementedError, match=r"aten::normal_ has no Neuron kernel.*TORCHNEURON_CPU_FALLBACK"):
            x.normal_()
        with pytest.raises(NotImplementedError, match=r"aten::maximum has no Neuron kernel"):
            torch.maximum(x, x)  # a host kernel of the emulator: rejected the same
        torch.nn.functional.linear(x, x).exp()  # registered on Trainium: runs
    finally:
        torch_neuronx._C._set_cpu_fallback_allowed(True)


# --- layouts Neuron does not support -----------------------------------------------------------------

def test_sparse_and_other_layouts_raise_naming_layout_op_and_fix():
    x = torch.eye(4, device=DEV)
    with pytest.raises(NotImplementedError, match=r"sparse_coo layout is not supported on neuron \(aten::_to_sparse.*dense.*cpu\(\)"):
        x.to_sparse()
    with pytest.raises(NotImplementedError, match=r"sparse_csr.*not supported on neuron"):
        x.to_sparse_csr()
    with pytest.raises(NotImplementedError, match=r"sparse.*not supported on neuron"):
        torch.sparse_coo_tensor(torch.tensor([[0], [1]]), torch.tensor([1.0]), (2, 2), device=DEV)
    csr = torch.eye(4).to_sparse_csr().to(DEV)  # moving builds the tensor; its first op raises
    with pytest.raises(NotImplementedError, match=r"sparse compressed.*not supported on neuron \(aten::sparse_sampled_addmm"):
        torch.sparse.sampled_addmm(csr, torch.randn(4, 4, device=DEV), torch.randn(4, 4, device=DEV))


# --- eager op signatures -----------------------------------------------------------------------------

def _train(lengths):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for n in lengths:
        loss = model(torch.randn(n, 16, device=DEV)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


def test_op_signatures_counted_and_growing_shapes_warn_once():
    torch_neuronx.clear_op_tracking()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        _train([8] * 10)  # fixed shapes: compiled once, no warning
    assert not [w for w in record if "new input shapes" in str(w.message)]
    fixed = torch_neuronx.get_op_signature_counts()
    assert fixed["aten::addmm"] >= 1
    torch_neuronx.clear_op_tracking()
    with pytest.warns(UserWarning, match=r"new input shapes.*aten::.*static.*pad") as record:
        _train(range(8, 20))  # a new batch size every step
    assert sum("new input shapes" in str(w.message) for w in record) == 1  # once
    assert torch_neuronx.get_op_signature_counts()["aten::addmm"] >= 12


def test_generate_with_a_dynamic_cache_gets_the_advice_within_a_few_tokens():
    # No optimizer steps: each top-level module call (one generated token) is a step of the rule.
    from transformers import DynamicCache
    from helpers import tiny_llama
    model = tiny_llama().to(DEV)
    prompt = torch.tensor([[1, 5, 9, 13]], device=DEV)
    torch_neuronx.clear_op_tracking()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model.generate(prompt, max_new_tokens=8, do_sample=False, past_key_values=DynamicCache(),
                       pad_token_id=0)
    advice = [w for w in record if "new input shapes" in str(w.message)]
    assert len(advice) == 1 and 'cache_implementation="static"' in str(advice[0].message), [str(w.message) for w in record]


# --- the switches, read from the environment at start-up ---------------------------------------------

def test_environment_switches():
    code = """
import warnings, torch, torch_neuronx
assert (torch.ones(1, dtype=torch.float64, device="neuron") / 3).item() == 1 / 3      # TORCHNEURON_FP64=exact
assert torch.full((2,), 2**40, device="neuron").sum().item() == 2**41              # TORCHNEURON_INT64=exact
x = torch.full((100_000,), 1 + 0.5 * 2.0**-7, device="neuron").to(torch.bfloat16).cpu().float()
assert abs((x - 1).mean().item() / 2.0**-7 - 0.5) < 0.02                          # stochastic rounding on
try:
    torch.ones(3, device="neuron").cumprod(0)
    raise SystemExit("cumprod ran with TORCHNEURON_CPU_FALLBACK=error")
except NotImplementedError as e:
    assert "aten::cumprod" in str(e)
print("ok")
"""
    env = dict(os.environ, TORCHNEURON_FP64="exact", TORCHNEURON_INT64="exact", NEURON_RT_STOCHASTIC_ROUNDING_EN="1",
               TORCHNEURON_CPU_FALLBACK="error", NEURON_FALLBACK_ENABLED="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]
    # NEURON_FALLBACK_ENABLED means what it means on Trainium (recovery after a Neuron failure): nothing here.
    assert "NEURON_FALLBACK_ENABLED=0 turns off TorchNeuron's recovery" in out.stderr, out.stderr[-3000:]


def test_compile_failure_raises_unless_fallback_execution_enabled(monkeypatch):
    def f(x):
        return x * 2 + 1
    x = torch.randn(4, device=DEV)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="not_a_config_option"):
        torch.compile(f, backend="neuron", options={"not_a_config_option": 1})(x)
    torch._dynamo.reset()
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    with pytest.warns(UserWarning, match="running this graph eagerly"):
        y = torch.compile(f, backend="neuron", options={"not_a_config_option": 1})(x)
    assert torch.equal(y.cpu(), f(x.cpu()))
    torch._dynamo.reset()
