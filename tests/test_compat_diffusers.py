"""`torchneuron compat --suite diffusers`: CI's fixed sample of pipelines passes on neuron, eager and with the
denoiser compiled, and the report counts it and lists unbuilt pipelines with the reason.

One real run of the command (module fixture, --jobs 2): the sample plus one pipeline class without a recipe.
Nothing is mocked: workers, subprocesses and report files are those of a real run. (How failures are categorized
and reported is the shared machinery's, tested with injected faults in tests/test_compat.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT

TESTS = os.path.dirname(os.path.abspath(__file__))

# CI's fixed sample: a UNet pipeline, an MMDiT (Flux) and an unconditional one; eager and compiled.
SAMPLE = ["StableDiffusionPipeline", "FluxPipeline", "DDIMPipeline"]
# Found by the matrix, open (strict: the mark goes with the fix).
KNOWN_FAILURES: dict[str, str] = {}  # pipeline -> reason; each a strict xfail, removed with its fix
TIMEOUT = 400  # per pipeline: build, CPU, neuron eager, and a compile of the denoiser on a busy machine


def _cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torch_neuronx.cli", "compat", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _not_built() -> str:
    from torch_neuronx.compat.pipelines import registry
    return next(iter(registry.not_runnable()))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("compat-diffusers")
    proc = _cli("--suite", "diffusers", "--mode", "both", "--jobs", "2", "--timeout", str(TIMEOUT), "--out", str(out),
                "--pipeline", *SAMPLE, _not_built(), timeout=1800)
    with open(out / "compat.json") as f:
        doc = json.load(f)
    return proc, doc, (out / "compat.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[n]))
                                  if n in KNOWN_FAILURES else n for n in SAMPLE])
def test_sample_pipeline_matches_cpu_eager_and_compiled(run, name):
    _, doc, _ = run
    r = doc["results"][name]
    assert r["suite"] == "diffusers" and r["cpu"]["status"] == "pass", r["cpu"]
    assert {s: v["status"] for s, v in r["steps"].items()} == {"eager": "pass", "compiled": "pass"}, r["steps"]
    assert r["steps"]["eager"]["max_abs_diff"] <= 1e-4
    counts = r["compile"]["compiled"]
    assert counts["graphs"] >= 1 and counts["graph_breaks"] == 0 and counts["recompiles"] == 0, counts


@pytest.mark.slow
def test_report_counts_and_explains(run):
    proc, doc, md = run
    failing = len(KNOWN_FAILURES)
    assert proc.returncode == (1 if failing else 0), proc.stdout[-2000:]
    assert doc["versions"]["diffusers"] != "not installed" and doc["date"] in md
    for mode in ("eager", "compiled"):
        s = doc["summary"][mode]
        assert (s["compatible"], s["cpu_passing"], s["not_built"]) == (len(SAMPLE) - failing, len(SAMPLE), 1), s
    assert "[0 of 4 pipelines fail on CPU too, 1 not built here: not counted]" in md
    assert "## Not built here" in md and f"`{_not_built()}`" in md


def test_every_pipeline_class_is_run_or_has_a_reason():
    """The matrix accounts for every pipeline class of the installed Diffusers; no recipe names a missing class."""
    from torch_neuronx.compat.pipelines import builders, registry
    classes = set(registry.pipeline_classes())
    runnable, skipped = set(registry.runnable()), set(registry.not_runnable())
    assert runnable | skipped == classes | set(registry.import_errors()) and not runnable & skipped
    # a recipe may name a class that needs the matrix extra's packages (not installed in CI): then its reason says
    # which extra installs them
    needs_extra = {n for n, e in registry.import_errors().items() if f"pip install -e .[{registry.MATRIX_EXTRA}]" in str(e)}
    assert set(builders.RECIPES) <= classes | needs_extra, set(builders.RECIPES) - classes - needs_extra
    assert {"StableDiffusionPipeline", "StableDiffusionXLPipeline", "FluxPipeline"} <= runnable
    assert len(classes) > 200  # Diffusers 0.42 exports ~290 PyTorch pipeline classes


def test_a_missing_package_of_the_matrix_extra_names_the_extra():
    from torch_neuronx.compat.pipelines import registry
    assert registry.missing_backends_reason("KolorsPipeline", ["sentencepiece"]) == (
        "KolorsPipeline needs sentencepiece (not installed): `pip install -e .[diffusers-matrix]` installs it")
    # a package the extra does not have: no install advice that would not work
    assert registry.missing_backends_reason("OmniGenPipeline", ["torchvision"]) == (
        "OmniGenPipeline needs torchvision (not installed)")


def test_cli_rejects_what_cannot_run():
    r = _cli("--suite", "diffusers", "--pipeline", "NoSuchPipeline")
    assert r.returncode == 2 and "not in Diffusers' pipeline classes: NoSuchPipeline" in r.stdout
    r = _cli("--pipeline", "FluxPipeline")
    assert r.returncode == 2 and "--pipeline goes with --suite diffusers" in r.stdout


@pytest.mark.slow
def test_resume_runs_a_pipeline_that_was_not_built_before(tmp_path):
    """A report from before a pipeline had a recipe lists it as not built; --resume runs it now (not its old row)."""
    from torch_neuronx.compat import cli, report
    old = cli._not_runnable_result("DDIMPipeline", "no builder", "no recipe of tiny components")
    report.write({"DDIMPipeline": old}, str(tmp_path))
    proc = _cli("--suite", "diffusers", "--mode", "eager", "--resume", "--out", str(tmp_path), "--pipeline",
                "DDIMPipeline", timeout=600)
    r = report.load(str(tmp_path / "compat.json"))["DDIMPipeline"]
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert not report.not_built(r) and r["steps"]["eager"]["status"] == "pass", r


def test_compiled_tolerance_is_the_cpu_compiles_own_rounding():
    """Outside the fixed tolerance, a compiled output may move from CPU eager as far as twice the CPU compile does,
    never more than one 8-bit pixel level; a neuron output farther than that still fails."""
    import numpy as np
    from torch_neuronx.compat.pipelines import worker
    ref = np.random.default_rng(0).random((1, 8, 8, 3), dtype=np.float32)
    cpu_compiled = ref + 4e-4  # as KandinskyV22Inpaint's compiled UNet moves the blended image
    atol = worker.compiled_tolerance(worker.max_abs_diff(ref, cpu_compiled))
    assert np.isclose(atol, 8e-4, rtol=1e-3)
    assert not worker.compare(ref, ref + 5e-4)[0] and worker.compare(ref, ref + 5e-4, atol)[0]
    assert not worker.compare(ref, ref + 2e-3, atol)[0]  # farther than the CPU compile's rounding: a real mismatch
    assert worker.compiled_tolerance(1e-6) == worker.ATOL  # a clean CPU compile widens nothing
    assert worker.compiled_tolerance(0.2) == worker.COMPILE_ROUNDING_CAP  # a compile that changes the picture
    assert worker.compiled_tolerance(float("inf")) == worker.ATOL  # a CPU output of another shape: no rounding to go by


def test_a_second_denoiser_of_the_same_class_is_an_expected_recompile():
    """Stable Cascade's prior and decoder are both StableCascadeUNet (of other sizes): compiling both recompiles the
    class's forward once, by construction; a recompile beyond that still fails the step."""
    import torch
    from torch_neuronx.compat.compile_counters import CompileCounts
    from torch_neuronx.compat.pipelines import worker
    from torch_neuronx.compat.worker import _compile_verdict
    modules = {"prior_prior": torch.nn.Linear(4, 4), "decoder": torch.nn.Linear(2, 2), "vae": torch.nn.Conv2d(1, 1, 1)}
    expected = worker.same_class_instances(modules)
    assert expected == 1
    once = CompileCounts(graphs=2, recompiles=1, recompile_reasons=["input L['sample'] changed shape"])
    assert _compile_verdict(once, expected) == (None, "") and _compile_verdict(once)[0] == "recompile"
    twice = CompileCounts(graphs=3, recompiles=2, recompile_reasons=["a", "b"])
    assert _compile_verdict(twice, expected)[0] == "recompile"


# --- counting: the same category on CPU is not the same failure (a real run, a fault injected) ------------------

@pytest.fixture(scope="module")
def fault_run(tmp_path_factory):
    """DDIMPipeline compiled, its denoiser breaking the graph once on CPU and twice on neuron
    (compat_pipeline_fault_worker.py, run with --worker)."""
    out = tmp_path_factory.mktemp("compat-diffusers-fault")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH")) if p),
               TORCHNEURON_COMPAT_FAULT="DDIMPipeline:neuron-extra-graph-break")
    proc = _cli("--suite", "diffusers", "--mode", "compiled", "--worker", "compat_pipeline_fault_worker", "--timeout",
                str(TIMEOUT), "--out", str(out), "--pipeline", "DDIMPipeline", env=env, timeout=900)
    with open(out / "compat.json") as f:
        doc = json.load(f)
    return proc, doc, (out / "compat.md").read_text()


@pytest.mark.slow
def test_the_same_category_on_cpu_is_not_the_same_failure(fault_run):
    proc, doc, md = fault_run
    step = doc["results"]["DDIMPipeline"]["steps"]["compiled"]
    assert step["status"] == "fail" and step["category"] == "graph break", step
    assert step["cpu_compiled"]["category"] == "graph break" and not step.get("cpu_too"), step
    assert "graph breaks" in step["cpu_differs"], step
    assert doc["summary"]["compiled"]["cpu_compiled_failing"] == 0
    assert "### graph break (1)" in md and "`DDIMPipeline` compiled" in md
    assert proc.returncode == 1, proc.stdout[-2000:]


def _pipeline_row(compiled: dict) -> dict:
    return {"arch": "x", "suite": "diffusers", "family": "demo", "cpu": {"status": "pass", "output_shape": [1, 8, 8, 3]},
            "steps": {"eager": {"status": "pass", "max_abs_diff": 0.0}, "compiled": compiled}, "compile": {}}


def test_report_states_the_fixed_tolerance_and_lists_widened_passes_apart():
    """Every compiled pass that needed the CPU compile's rounding is counted apart: the summary gives the rate at the
    fixed tolerance alone, the report names each such row."""
    from torch_neuronx.compat import report
    from torch_neuronx.compat.pipelines import report as pipeline_report
    rows = {"FixedPipeline": _pipeline_row({"status": "pass", "max_abs_diff": 1e-5}),
            "WidenedPipeline": _pipeline_row({"status": "pass", "max_abs_diff": 5e-4, "atol": 8e-4,
                                              "tolerance_from": "CPU compiled (Inductor) differs from CPU eager by "
                                                                "0.0004: atol 0.0008"})}
    s = report.summarize(rows, "compiled")
    assert (s.compatible, s.cpu_passing, s.widened) == (2, 2, 1)
    assert "1 passed only within a widened tolerance: 1/2 (50.0%) at the fixed tolerance" in s.line()
    md = pipeline_report.to_markdown(rows)
    assert "Fixed tolerance: atol 0.0001, rtol 0.001" in md
    widened = md.split("## Compiled: passed only within a widened tolerance")[1]
    assert "- `WidenedPipeline`: max |diff| 0.0005" in widened and "FixedPipeline" not in widened
