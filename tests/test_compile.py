"""torch.compile(backend="neuron"): numerics against eager/CPU, static shapes and recompile accounting,
graph breaks, the persistent NEFF cache (second process, corruption, disable), generation, HF wiring.

Compiling is slow on a small machine (Inductor builds C++ kernels), so the tests share small
models and a per-session NEFF cache directory; each test resets Dynamo so that it counts only
its own graphs.
"""

import logging
import os

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx
from helpers import run_python, tiny_llama


@pytest.fixture(scope="module", autouse=True)
def neff_cache_dir(tmp_path_factory):
    """One fresh cache directory for this file; never the user's own cache."""
    path = str(tmp_path_factory.mktemp("neff-cache"))
    names = ("TORCH_NEURONX_NEFF_CACHE_DIR", "TORCH_NEURONX_DISABLE_NEFF_CACHE", "TORCH_NEURONX_NEFF_DISABLE_CACHE",
             "TORCH_NEURONX_NEFF_CACHE_KEY_FILE")
    saved = {k: os.environ.get(k) for k in names}
    for k in names[1:]:
        os.environ.pop(k, None)
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = path
    yield path
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32),
                               torch.nn.LayerNorm(32))


def gelu_proj(x, w):
    """The small function of the shape and cache tests: one matmul and a fused pointwise tail."""
    return F.gelu(x @ w) * 2.0


def stats():
    return torch_neuronx.compile_stats()


# ------------------------------------------------------------------ registration

def test_backend_registered_and_import_torch_stays_light():
    assert "neuron" in torch._dynamo.list_backends()
    from torch._dynamo.device_interface import get_interface_for_device
    assert get_interface_for_device("neuron").device_count() == torch.neuron.device_count()
    # Registration waits for Dynamo: a plain `import torch` must not import it (it costs seconds).
    r = run_python("import sys, torch; print('torch._dynamo' in sys.modules, 'torch._inductor' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


# ------------------------------------------------------------------ numerics

def test_mlp_forward_backward_match_eager_and_stay_on_device():
    ref = mlp()
    x = torch.randn(16, 32)
    ref(x).pow(2).sum().backward()

    model = mlp().to("neuron")
    compiled = torch.compile(model, backend="neuron")
    xn = x.to("neuron")
    before = torch.neuron.memory_allocated()
    out = compiled(xn)
    assert out.device.type == "neuron"
    assert torch.neuron.memory_allocated() > before  # graph outputs are device memory, counted in HBM
    out.pow(2).sum().backward()
    torch.testing.assert_close(out.cpu(), ref(x), rtol=1e-5, atol=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        assert p.grad.device.type == "neuron"
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-3, atol=1e-4)
    s = stats()
    assert s["graphs_compiled"] == 1 and s["neffs_built"] + s["cache_hits"] == 2  # forward and backward NEFFs


def test_graph_without_operations_runs_on_device():
    """The backward of `x + 1` only passes its incoming grad on: Inductor returns no code for it."""
    x = torch.randn(4, 8, device="neuron", requires_grad=True)
    out = torch.compile(lambda x: x + 1, backend="neuron")(x)
    out.backward(torch.full((4, 8), 3.0, device="neuron"))
    assert x.grad.device.type == "neuron" and torch.equal(x.grad.cpu(), torch.full((4, 8), 3.0))


@pytest.mark.slow
def test_tiny_llama_train_step_matches_cpu():
    """Forward + backward + AdamW, compiled on neuron, against the same steps in CPU eager."""
    ids = torch.randint(3, 256, (2, 32), generator=torch.Generator().manual_seed(0))

    def train(model, device, compile_it):
        model = model.to(device).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        step_fn = torch.compile(model, backend="neuron") if compile_it else model
        x = ids.to(device)
        losses = []
        for _ in range(2):
            loss = step_fn(input_ids=x, labels=x).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
        return losses, model

    cpu_losses, cpu_model = train(tiny_llama(num_hidden_layers=1), "cpu", False)
    neuron_losses, neuron_model = train(tiny_llama(num_hidden_layers=1), "neuron", True)
    assert neuron_losses == pytest.approx(cpu_losses, rel=1e-4)
    for (name, p), q in zip(neuron_model.named_parameters(), cpu_model.parameters()):
        assert p.device.type == "neuron"
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-3, atol=1e-4, msg=name)
    assert stats()["graphs_compiled"] == 1  # one shape, one graph (forward + backward NEFFs)


FIRST_TRAINING_STEPS = """
import torch, torch_neuronx
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
step = torch.compile(model, backend="neuron", dynamic=False)
x = torch.randn(8, 32).to("neuron")
for _ in range(3):
    step(x).square().mean().backward()
    opt.step()
    opt.zero_grad()
s = torch_neuronx.compile_stats()
print(s["graphs_compiled"], s["num_recompiles"])
"""


def test_first_optimizer_step_of_a_fresh_process_recompiles_nothing():
    """The eager rule's module-call hooks (ops_report.py) leave when Dynamo starts compiling, not at the first
    optimizer step: a graph traced with them would be guarded on them and compiled a second time."""
    run = run_python(FIRST_TRAINING_STEPS)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[-2:] == ["1", "0"]  # one graph, no recompile


def test_diffusers_transformer_block_matches_cpu_with_fused_attention(monkeypatch):
    from diffusers.models.attention import BasicTransformerBlock
    from torch._inductor.utils import run_and_get_code
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")  # generate the code, to inspect it
    torch.manual_seed(0)
    block = BasicTransformerBlock(dim=32, num_attention_heads=2, attention_head_dim=16,
                                  cross_attention_dim=24).eval()
    x, context = torch.randn(2, 16, 32), torch.randn(2, 8, 24)
    with torch.no_grad():
        ref = block(x, encoder_hidden_states=context)
        compiled = torch.compile(block.to("neuron"), backend="neuron")
        out, (code,) = run_and_get_code(compiled, x.to("neuron"), encoder_hidden_states=context.to("neuron"))
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-4, atol=1e-5)
    # Attention compiles to the host's fused attention kernel, as on CPU, not to unfused bmm/softmax.
    assert "_scaled_dot_product_flash_attention_for_cpu" in code and "bmm" not in code


def test_inductor_backend_on_neuron_tensors_points_to_the_neuron_backend():
    with pytest.raises(Exception, match="backend='neuron'"):
        torch.compile(lambda x: x * 2)(torch.ones(4, device="neuron"))


def test_dropout_draws_its_masks_from_the_cpu_generator():
    """As TorchNeuron's RandomOpLegalization: compiled dropout masks are drawn on the CPU, so torch.manual_seed
    decides them, and they are the masks CPU eager dropout draws for that seed."""
    f = torch.compile(lambda x: F.dropout(x, 0.5, training=True), backend="neuron")
    x = torch.ones(64, 64)
    torch.manual_seed(7)
    a = f(x.to("neuron"))
    torch.manual_seed(7)
    b = f(x.to("neuron"))
    c = f(x.to("neuron"))
    assert torch.equal(a.cpu(), b.cpu()) and not torch.equal(b.cpu(), c.cpu())
    assert set(a.cpu().unique().tolist()) == {0.0, 2.0}
    torch.manual_seed(7)
    assert torch.equal(a.cpu(), F.dropout(x, 0.5, training=True))


def test_attention_dropout_draws_the_cpu_generators_mask_forward_and_backward():
    """scaled_dot_product_attention with dropout_p compiled: the mask on the attention weights is drawn on the CPU
    (TorchNeuron's legalized native_dropout of its attention decomposition), so for a seed it is CPU eager's
    mask; the backward uses the same mask. Grouped-query heads and causal masking included."""
    q, k, v = torch.randn(2, 4, 6, 8, requires_grad=True), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    grad = torch.randn(2, 4, 6, 8)
    kw = dict(dropout_p=0.3, is_causal=True, enable_gqa=True)
    torch.manual_seed(3)
    ref = F.scaled_dot_product_attention(q, k, v, **kw)
    ref.backward(grad)
    qd = q.detach().to("neuron").requires_grad_()
    f = torch.compile(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, **kw), backend="neuron")
    torch.manual_seed(3)
    out = f(qd, k.to("neuron"), v.to("neuron"))
    out.backward(grad.to("neuron"))
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(qd.grad.cpu(), q.grad, rtol=1e-5, atol=1e-5)


def test_attention_limited_to_the_overrideable_backend_compiles_and_matches_cpu():
    """sdpa_kernel(SDPBackend.OVERRIDEABLE) (TorchNeuron's own SDPA backend, the only one allowed): eager and
    compiled neuron both find it, and compute CPU's attention."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def f(q, k, v):
        with sdpa_kernel(SDPBackend.OVERRIDEABLE):
            return F.scaled_dot_product_attention(q, k, v)

    q, k, v = torch.randn(1, 2, 8, 16), torch.randn(1, 2, 24, 16), torch.randn(1, 2, 24, 16)
    ref = F.scaled_dot_product_attention(q, k, v)
    dev = [t.to("neuron") for t in (q, k, v)]
    torch.testing.assert_close(f(*dev).cpu(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.compile(f, backend="neuron")(*dev).cpu(), ref, rtol=1e-5, atol=1e-5)


def test_checkpointed_dropout_replays_the_same_mask_in_backward():
    """Activation checkpointing in a compiled graph recomputes dropout in the backward from the saved
    state of the CPU generator it draws from (run_and_save_rng_state / run_with_rng_state on neuron)."""
    from torch.utils.checkpoint import checkpoint

    def f(x):
        return checkpoint(lambda y: F.dropout(y, 0.5, training=True) * 3, x, use_reentrant=False)

    x = torch.ones(64, 64, device="neuron", requires_grad=True)
    out = torch.compile(f, backend="neuron")(x)
    out.sum().backward()
    # d(out)/dx = mask * 2 * 3 = out for x == 1: equal only if the backward replayed the forward's mask
    assert set(out.detach().cpu().unique().tolist()) == {0.0, 6.0}
    assert torch.equal(x.grad.cpu(), out.detach().cpu())


def test_integer_histc_keeps_the_device_semantics():
    """neuron counts integer histc like CUDA (the host kernel has no integer histc): compiled code too."""
    x = torch.tensor([0, 1, 1, 3, 3, 3], dtype=torch.int32, device="neuron")
    out = torch.compile(lambda x: torch.histc(x, bins=4, min=0, max=3) + 1, backend="neuron")(x)
    assert out.dtype == torch.int32 and out.cpu().tolist() == [2, 3, 1, 4]


def test_tensor_constants_made_in_the_traced_code_match_eager():
    """Constants the graph keeps as real tensors (CPM-Ant's reversed positions made on the device, a host
    0-dim tensor): copied to the host for compilation and hashed for the cache outside the fake mode."""
    def f(x):
        rev = torch.tensor(list(range(4))[::-1], device=x.device)[None, :]
        return x * rev + (x.bool() == torch.tensor(False)).float()

    x = torch.tensor([[0., 1., 2., 3.], [4., 0., 6., 7.]])
    out = torch.compile(f, backend="neuron")(x.to("neuron"))
    assert out.device.type == "neuron" and torch.equal(out.cpu(), f(x))


def test_tensor_constant_given_to_an_aten_kernel_compiles_and_loads_from_the_cache():
    """An index list built in Python (QwenImage-2.1's token positions), too long to inline in the kernels:
    Inductor keeps it as a tensor constant and passes it to ATen's index kernel. It is copied to the
    device outside the compiler's fake mode, and a cache hit unpickles it as a real tensor (a fake one
    was read as a null pointer)."""
    def f(x, idx):
        return x[torch.tensor(idx, device=x.device)] * 2

    x = torch.randn(24, 4)
    idx = [i for i in range(24) if i % 3]
    for attempt in ("built", "from the cache"):
        torch._dynamo.reset()
        out = torch.compile(f, backend="neuron")(x.to("neuron"), idx)
        assert torch.equal(out.cpu(), f(x, idx)), attempt
    assert stats()["cache_hits"] >= 1


def test_host_tensor_attribute_moved_to_the_device_in_forward_reaches_aten_kernels_on_the_device():
    """A rotary table kept as a plain attribute (QwenImage's `pos_freqs`) stays on the CPU in `.to("neuron")`
    and is moved in forward; its complex multiply is an ATen call in the compiled graph, which must see
    it on the device, as eager does."""
    class Rope(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.freqs = torch.polar(torch.ones(8, 4), torch.randn(8, 4, generator=torch.Generator().manual_seed(0)))

        def forward(self, x):
            rotated = torch.view_as_complex(x.reshape(8, 4, 2)) * self.freqs.to(x.device)
            return torch.view_as_real(rotated).flatten(1)

    model, x = Rope(), torch.randn(8, 8)
    out = torch.compile(model.to("neuron"), backend="neuron")(x.to("neuron"))
    assert out.device.type == "neuron" and torch.allclose(out.cpu(), model(x), atol=1e-6)
    assert model.freqs.device.type == "cpu"  # the caller's tensor is left where it was



def test_tensor_the_graph_creates_for_an_aten_call_is_on_the_device():
    """Z-Image pads its complex rotary table with pad_sequence: the complex `full` is an ATen call Inductor's
    wrapper makes with the retargeted graph's device, "cpu"; it must be the graph's core, or the next op
    mixes devices ("found at least two devices, neuron:0 and cpu")."""
    def f(x, y):
        padded = torch.view_as_complex(x.reshape(2, 4, 2)).new_full((2, 6), 0.0)
        padded[:, :4] = torch.view_as_complex(x.reshape(2, 4, 2))
        return torch.view_as_real(padded * torch.view_as_complex(y)).flatten()

    x, y = torch.randn(2, 4, 2), torch.randn(2, 6, 2)
    out = torch.compile(f, backend="neuron")(x.to("neuron"), y.to("neuron"))
    assert out.device.type == "neuron" and torch.allclose(out.cpu(), f(x, y), atol=1e-6)

# ------------------------------------------------------------------ static shapes, recompiles

def test_new_shape_compiles_exactly_one_more_graph_and_padding_to_128_compiles_none(caplog):
    f = torch.compile(gelu_proj, backend="neuron")
    w = torch.randn(128, 64, device="neuron")
    with torch.no_grad():
        f(torch.randn(4, 128, device="neuron"), w)
        f(torch.randn(4, 128, device="neuron"), w)
        assert stats()["graphs_compiled"] == 1
        with caplog.at_level(logging.WARNING, logger="torch_neuronx.compile"):
            short = torch.randn(4, 96, device="neuron")
            out = f(short, w[:96])
        s = stats()
        assert s["graphs_compiled"] == 2 and s["num_recompiles"] == 1
        change = s["recompiles"][0]["changed_inputs"]
        assert [(c["old"], c["new"]) for c in change if c["input"].startswith("L['x']")] == [((4, 128), (4, 96))]
        line = next(r.getMessage() for r in caplog.records if "recompiling" in r.getMessage())
        assert "L['x']" in line and "(4, 128) -> (4, 96)" in line and "pad to 128" in line
        torch.testing.assert_close(out.cpu(), gelu_proj(short.cpu(), w[:96].cpu()), rtol=1e-4, atol=1e-4)

        # Pad to the multiple of 128 instead: the first graph serves it (zero padding adds nothing
        # to x @ w), and nothing compiles.
        padded = f(F.pad(short, (0, 32)), w)
        assert stats()["graphs_compiled"] == 2
        torch.testing.assert_close(padded.cpu(), out.cpu(), rtol=1e-4, atol=1e-4)

        # Dynamo's default (dynamic=None) would now trace a third shape with symbolic sizes; the backend's
        # settings keep it static: one more graph, for exactly that shape.
        third = torch.randn(4, 64, device="neuron")
        torch.testing.assert_close(f(third, w[:64]).cpu(), gelu_proj(third.cpu(), w[:64].cpu()), rtol=1e-4, atol=1e-4)
        s = stats()
        assert s["graphs_compiled"] == 3 and s["num_recompiles"] == 2
        assert [(c["old"], c["new"]) for c in s["recompiles"][1]["changed_inputs"]
                if c["input"].startswith("L['x']")] in ([((4, 96), (4, 64))], [((4, 128), (4, 64))])


def test_dynamic_true_is_rejected():
    f = torch.compile(gelu_proj, backend="neuron", dynamic=True)  # the backend is first called by the first call
    with pytest.raises(Exception, match=r"NeuronCompileError: torch.compile\(backend='neuron', dynamic=True\) is not "
                                        r"supported.*pad inputs to fixed sizes"):
        f(torch.randn(4, 128, device="neuron"), torch.randn(128, 8, device="neuron"))


def test_marked_dynamic_dimension_is_rejected_with_a_clear_error():
    f = torch.compile(gelu_proj, backend="neuron")
    x = torch.randn(4, 128, device="neuron")
    torch._dynamo.mark_dynamic(x, 0)
    with pytest.raises(Exception, match="static shapes only.*L\\['x'\\]"):
        f(x, torch.randn(128, 8, device="neuron"))


def test_dynamo_metrics_on_torch_neuron():
    f = torch.compile(gelu_proj, backend="neuron")
    with torch.no_grad():
        f(torch.randn(2, 128, device="neuron"), torch.randn(128, 8, device="neuron"))
    m = torch.neuron.get_dynamo_metrics()
    assert m["graphs_compiled"] == 1 and m["compile_seconds"] > 0
    assert set(m) >= {"graphs_compiled", "cache_hits", "recompiles", "graph_breaks", "compile_seconds"}
    torch.neuron.reset_dynamo_metrics()
    assert torch.neuron.get_dynamo_metrics()["graphs_compiled"] == 0


# ------------------------------------------------------------------ graph breaks

def with_graph_break(x, w):
    y = gelu_proj(x, w)
    torch._dynamo.graph_break()  # stands for any untraceable Python in user code
    return y.sum(dim=-1) + 1


def test_graph_break_runs_eagerly_on_device_and_is_reported():
    x, w = torch.randn(4, 128), torch.randn(128, 8)
    with torch.no_grad():
        out = torch.compile(with_graph_break, backend="neuron")(x.to("neuron"), w.to("neuron"))
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), with_graph_break(x, w), rtol=1e-4, atol=1e-4)
    s = stats()
    assert s["num_graph_breaks"] == 1 and "graph_break" in s["graph_breaks"][0]["reason"]
    assert "with_graph_break" in s["graph_breaks"][0]["location"]


def test_transformers_warning_once_does_not_break_the_graph():
    import transformers  # noqa: F401  (adds Logger.warning_once, called in its loss functions)

    logger = logging.getLogger("transformers.loss")  # a module-level logger, as in Transformers

    def loss_like(x):
        y = x * 2
        logger.warning_once("no loss type in the class name")
        return y.sum()

    with torch.no_grad():
        out = torch.compile(loss_like, backend="neuron")(torch.ones(8, device="neuron"))
    assert out.item() == 16.0 and stats()["num_graph_breaks"] == 0


def test_fullgraph_with_graph_break_errors():
    f = torch.compile(with_graph_break, backend="neuron", fullgraph=True)
    with pytest.raises(torch._dynamo.exc.Unsupported, match="graph_break"):
        f(torch.randn(4, 128, device="neuron"), torch.randn(128, 8, device="neuron"))


# ------------------------------------------------------------------ NEFF cache

CACHE_RUN = """
import torch, torch_neuronx, torch.nn.functional as F
torch.manual_seed(0)
x, w = torch.randn(4, 128), torch.randn(128, 16)
f = torch.compile(lambda x, w: F.gelu(x @ w) * 2.0, backend="neuron")
with torch.no_grad():
    out = f(x.to("neuron"), w.to("neuron")).cpu()
assert torch.allclose(out, F.gelu(x @ w) * 2.0, atol=1e-5), "wrong result"
s = torch_neuronx.compile_stats()
print(s["neffs_built"], s["cache_hits"], s["cache_corrupt_entries"])
"""


def neff_files(root):
    return sorted(os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f == "model.neff")


@pytest.mark.slow
def test_second_process_reuses_the_cache():
    # This process compiles and stores the graph; a second process must find it and compile nothing.
    root = os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"]
    before = set(neff_files(root))
    x, w = torch.randn(4, 128), torch.randn(128, 16)  # shapes no other test uses: a new entry
    with torch.no_grad():
        torch.compile(gelu_proj, backend="neuron")(x.to("neuron"), w.to("neuron"))
    assert stats()["neffs_built"] == 1
    (entry,) = set(neff_files(root)) - before
    assert "torch-neuronx-" in entry and "MODULE_" in entry

    second = run_python(CACHE_RUN)
    assert second.returncode == 0, second.stderr  # and the result is right (checked in CACHE_RUN)
    assert second.stdout.split() == ["0", "1", "0"]  # nothing compiled: loaded from the cache


def flip_one_bit(data: bytes) -> bytes:
    damaged = bytearray(data)
    damaged[len(damaged) // 2] ^= 0x01  # in the middle of the kernels or the serialized graph
    return bytes(damaged)


@pytest.mark.parametrize("damage", [flip_one_bit, lambda d: d[:len(d) // 3], lambda d: b"garbage"],
                         ids=["bit-flip", "truncated", "garbage"])
def test_corrupted_entry_is_detected_and_rebuilt(damage, caplog):
    x, w = torch.randn(4, 128, device="neuron"), torch.randn(128, 24, device="neuron")
    with torch.no_grad():
        expected = gelu_proj(x, w).cpu()
        torch.compile(gelu_proj, backend="neuron")(x, w)  # built, or loaded from an earlier run
    root = os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"]
    entry = max(neff_files(root), key=os.path.getmtime)
    damaged = damage(open(entry, "rb").read())
    open(entry, "wb").write(damaged)

    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="torch_neuronx.compile"):
        out = torch.compile(gelu_proj, backend="neuron")(x, w).cpu()
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)  # never a wrong result
    s = stats()
    assert s["cache_corrupt_entries"] == 1 and s["neffs_built"] == 1 and s["cache_hits"] == 0
    assert any("corrupted" in r.getMessage() for r in caplog.records)
    assert open(entry, "rb").read() != damaged  # replaced by a good entry


def test_cache_key_changes_with_the_code_generation_sources_only(tmp_path):
    """Editing a plugin file that does not shape generated code keeps every cache entry valid."""
    import shutil
    from torch_neuronx.compile import neff_cache
    package = os.path.dirname(neff_cache.__file__)
    copy = tmp_path / "compile"
    shutil.copytree(package, copy)
    assert neff_cache.codegen_fingerprint(str(copy)) == neff_cache.codegen_fingerprint()
    for unrelated in ("stats.py", "launch.py", "neff_cache.py", "cache_trust.py"):
        with open(copy / unrelated, "a") as f:
            f.write("\n# an unrelated edit\n")
    assert neff_cache.codegen_fingerprint(str(copy)) == neff_cache.codegen_fingerprint()
    for source in neff_cache.CODEGEN_SOURCES:
        edited = tmp_path / "edited"
        shutil.copytree(package, edited)
        with open(edited / source, "a") as f:
            f.write("\n# a code generation change\n")
        assert neff_cache.codegen_fingerprint(str(edited)) != neff_cache.codegen_fingerprint()
        shutil.rmtree(edited)
    assert neff_cache.codegen_fingerprint().encode() in neff_cache._environment_fingerprint()


def test_disable_cache_reads_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")
    with torch.no_grad():
        torch.compile(gelu_proj, backend="neuron")(torch.randn(4, 128, device="neuron"),
                                                   torch.randn(128, 40, device="neuron"))
    assert neff_files(tmp_path) == []
    assert stats()["cache_hits"] == 0 and stats()["neffs_built"] == 1


@pytest.mark.slow
def test_truncated_inductor_kernel_library_is_rebuilt(tmp_path):
    # A compile killed while Inductor wrote a kernel library leaves a truncated .so in Inductor's
    # directory, which Inductor would load as is ("file too short") in every later process.
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TORCH_NEURONX_DISABLE_NEFF_CACHE": "1"}
    first = run_python(CACHE_RUN, env)
    assert first.returncode == 0, first.stderr
    libraries = [os.path.join(d, f) for d, _, files in os.walk(tmp_path / "inductor") for f in files
                 if f.endswith(".so")]
    kernel = max(libraries, key=os.path.getmtime)  # the graph's kernel library, built last
    open(kernel, "wb").close()  # as a killed compile leaves it

    second = run_python(CACHE_RUN, env)
    assert second.returncode == 0, second.stderr  # and the result is right (checked in CACHE_RUN)
    built, hits, damaged = map(int, second.stdout.split())
    assert damaged >= 1 and built == 1 and hits == 0
    assert "is damaged (file too short" in second.stderr and "compiling again" in second.stderr
    assert os.path.getsize(kernel) > 0


# ------------------------------------------------------------------ Hugging Face

@pytest.mark.slow
def test_static_cache_generation_compiles_at_most_two_graphs_and_matches_cpu():
    ids = torch.randint(3, 256, (1, 12), generator=torch.Generator().manual_seed(1))
    ref = tiny_llama().generate(ids, max_new_tokens=32, do_sample=False, cache_implementation="static")
    model = tiny_llama().to("neuron")
    out = model.generate(ids.to("neuron"), max_new_tokens=32, do_sample=False, cache_implementation="static")
    assert model._last_compile_config.backend == "neuron"  # generate() compiled the forward itself
    assert torch.equal(out.cpu(), ref)
    s = stats()
    assert 1 <= s["graphs_compiled"] <= 2, s  # prefill (eager in Transformers 5) + decode


@pytest.mark.slow
def test_sliding_window_static_cache_compiles_two_decode_graphs_not_one_per_token(caplog):
    """The sliding-window layer's Python token count is traced as a symbolic int: one decode graph while
    the window fills, one once it is full (instead of a graph per decode step)."""
    from transformers import MistralConfig, MistralForCausalLM
    torch.manual_seed(0)
    cfg = MistralConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, sliding_window=16)
    model = MistralForCausalLM(cfg).eval()
    ids = torch.randint(3, 128, (2, 8), generator=torch.Generator().manual_seed(1))
    kw = dict(max_new_tokens=16, min_new_tokens=16, do_sample=False, cache_implementation="static", pad_token_id=0)
    ref = model.generate(ids, **kw)  # 8 + 16 tokens: the window of 16 fills during decoding
    with caplog.at_level(logging.WARNING, logger="torch_neuronx.compile"):
        out = model.to("neuron").generate(ids.to("neuron"), **kw)
    assert torch.equal(out.cpu(), ref)
    s = stats()
    assert s["graphs_compiled"] == 2 and s["num_recompiles"] == 1, s
    assert "cumulative_length_int <=" in s["recompiles"][0]["reason"]
    assert any("sliding window filled up" in r.getMessage() for r in caplog.records)


def test_training_arguments_torch_compile_picks_neuron_and_accelerate_compiles_with_it(tmp_path):
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import TorchDynamoPlugin
    from transformers import TrainingArguments
    args = TrainingArguments(output_dir=str(tmp_path), torch_compile=True, report_to=[])
    assert args.torch_compile_backend == "neuron"
    # What the Trainer then does with it: Accelerate compiles the model with that backend.
    try:
        accelerator = Accelerator(dynamo_plugin=TorchDynamoPlugin(backend=args.torch_compile_backend, dynamic=False))
        model = accelerator.prepare(torch.nn.Linear(16, 8))
        with torch.no_grad():
            y = model(torch.randn(4, 16, device=accelerator.device))
        assert y.device.type == "neuron" and stats()["graphs_compiled"] == 1
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
