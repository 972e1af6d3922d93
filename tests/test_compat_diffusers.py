"""`torchneuron compat --suite diffusers`: CI's fixed sample of pipelines passes on neuron, eager and with the
denoiser compiled, and the tool reports failures and unbuilt pipelines right.

One real run of the command (module fixture, --jobs 2): the sample, plus pipelines into which
TORCHNEURON_COMPAT_FAULT injects a real failure inside their worker process, plus one pipeline class without a
recipe. Nothing is mocked: workers, subprocesses and report files are those of a real run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT

# CI's fixed sample: a UNet pipeline, an MMDiT (Flux) and an unconditional one; eager and compiled.
SAMPLE = ["StableDiffusionPipeline", "FluxPipeline", "DDIMPipeline"]
# Each injected fault and the category the report must give it (eager mode of the same run).
FAULTS = {
    "DDPMPipeline": ("missing-op", "missing op"),
    "StableDiffusionImg2ImgPipeline": ("mismatch", "numeric mismatch"),
    "PixArtAlphaPipeline": ("cpu-fail", "cpu fails"),
}
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
    env = dict(os.environ, TORCHNEURON_COMPAT_FAULT=",".join(f"{p}:{f}" for p, (f, _) in FAULTS.items()))
    proc = _cli("--suite", "diffusers", "--mode", "both", "--jobs", "2", "--timeout", str(TIMEOUT), "--out", str(out),
                "--pipeline", *SAMPLE, *FAULTS, _not_built(), env=env, timeout=1800)
    with open(out / "compat.json") as f:
        doc = json.load(f)
    return proc, doc, (out / "compat.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLE)
def test_sample_pipeline_matches_cpu_eager_and_compiled(run, name):
    _, doc, _ = run
    r = doc["results"][name]
    assert r["suite"] == "diffusers" and r["cpu"]["status"] == "pass", r["cpu"]
    assert {s: v["status"] for s, v in r["steps"].items()} == {"eager": "pass", "compiled": "pass"}, r["steps"]
    assert r["steps"]["eager"]["max_abs_diff"] <= 1e-4
    counts = r["compile"]["compiled"]
    assert counts["graphs"] >= 1 and counts["graph_breaks"] == 0 and counts["recompiles"] == 0, counts


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAULTS))
def test_injected_failure_is_reported_with_its_category(run, name):
    _, doc, md = run
    fault, category = FAULTS[name]
    r = doc["results"][name]
    if fault == "cpu-fail":
        assert r["cpu"] == {**r["cpu"], "status": "fail", "category": category}
        assert f"`{name}` ({category})" in md
        return
    assert r["cpu"]["status"] == "pass"
    assert r["steps"]["eager"]["status"] == "fail" and r["steps"]["eager"]["category"] == category, r["steps"]
    assert f"- `{name}` eager: " in md


@pytest.mark.slow
def test_report_counts_and_explains(run):
    proc, doc, md = run
    assert proc.returncode == 1, proc.stdout[-2000:]  # the injected neuron failures count
    assert doc["versions"]["diffusers"] != "not installed" and doc["date"] in md
    eager = doc["summary"]["eager"]
    # sample + the two faults that reach neuron pass on CPU; the cpu-fail and the unbuilt one are not counted
    assert (eager["compatible"], eager["cpu_passing"], eager["not_built"]) == (len(SAMPLE), len(SAMPLE) + 2, 1)
    assert "compatible: 3/5 (60.0%)" in md and "1 of 7 pipelines fail on CPU too, 1 not built here" in md
    assert doc["summary"]["compiled"]["compatible"] == len(SAMPLE)  # the faults hit the compiled step too
    assert "## Not built here" in md and f"`{_not_built()}`" in md


def test_every_pipeline_class_is_run_or_has_a_reason():
    """The matrix accounts for every pipeline class of the installed Diffusers; no recipe names a missing class."""
    from torch_neuronx.compat.pipelines import builders, registry
    classes = set(registry.pipeline_classes())
    runnable, skipped = set(registry.runnable()), set(registry.not_runnable())
    assert runnable | skipped == classes | set(registry.import_errors()) and not runnable & skipped
    assert set(builders.RECIPES) <= classes, set(builders.RECIPES) - classes
    assert {"StableDiffusionPipeline", "StableDiffusionXLPipeline", "FluxPipeline"} <= runnable
    assert len(classes) > 200  # Diffusers 0.42 exports ~290 PyTorch pipeline classes


def test_cli_rejects_what_cannot_run():
    r = _cli("--suite", "diffusers", "--pipeline", "NoSuchPipeline")
    assert r.returncode == 2 and "not in Diffusers' pipeline classes: NoSuchPipeline" in r.stdout
    r = _cli("--pipeline", "FluxPipeline")
    assert r.returncode == 2 and "--pipeline goes with --suite diffusers" in r.stdout
