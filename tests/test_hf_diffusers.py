"""Diffusers on neuron (examples/hf_diffusers.py, hf_diffusers_tp.py, hf_diffusers_cp.py): tiny Flux and UNet
pipelines, saved and loaded like real ones, eager and compiled on neuron equal CPU; every transformer with a
tensor-parallel plan (Flux, Flux2, QwenImage, QwenImage-2.1), sharded over 2 and 4 ranks both ways, eager and
compiled, equals one CPU process; so does the image of a Flux pipeline whose transformer is sharded; every transformer
with a context-parallel plan, Ulysses and ring over 2 ranks, both ways, eager and compiled, equals one CPU process, and
so do the video and soundtrack of the MiniMax-H3 pipeline with its transformer context-parallel."""

import os
import sys

import pytest
import torch

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))
import hf_diffusers  # noqa: E402

COMPILE = hf_diffusers.neuron_compile_available()
needs_compile = pytest.mark.skipif(not COMPILE, reason="torch.compile backend 'neuron' not registered yet")
needs_dist = pytest.mark.skipif("neuron" not in torch.distributed.Backend.backend_list,
                                reason="c10d backend 'neuron' not registered yet")


@pytest.fixture(scope="module")
def flux_path(tmp_path_factory):
    return hf_diffusers.build_flux(str(tmp_path_factory.mktemp("tiny-flux")))


@pytest.fixture(scope="module")
def unet_path(tmp_path_factory):
    return hf_diffusers.build_unet_pipeline(str(tmp_path_factory.mktemp("tiny-unet")))


def test_flux_pipeline_eager_matches_cpu(flux_path):
    r = hf_diffusers.run("flux", flux_path, size=32, steps=2, compile_=False, atol=1e-4)
    assert r["eager"] <= 1e-4 and r["cpu_mean"] > 0


def test_unet_pipeline_eager_matches_cpu(unet_path):
    r = hf_diffusers.run("unet", unet_path, size=32, steps=2, compile_=False, atol=1e-4)
    assert r["eager"] <= 1e-4


@needs_compile
@pytest.mark.slow
def test_flux_and_unet_pipelines_compiled_match_cpu(flux_path, unet_path):
    for kind, path in (("flux", flux_path), ("unet", unet_path)):
        r = hf_diffusers.run(kind, path, size=32, steps=2, compile_=True, atol=1e-4)
        assert r["compiled"] <= 1e-4, (kind, r)


def test_every_transformer_with_a_tp_plan_has_a_tiny_config():
    """The TP test below covers every class of the installed Diffusers that plans tensor parallelism."""
    import hf_diffusers_tp
    planned = hf_diffusers_tp.planned_classes()
    assert {"FluxTransformer2DModel", "Flux2Transformer2DModel",
            "QwenImageTransformer2DModel", "QwenImage21Transformer2DModel"} <= set(planned)
    assert set(planned) <= set(hf_diffusers_tp.TINY), set(planned) - set(hf_diffusers_tp.TINY)


# One torchrun per degree, looping over the models inside (a launch costs more than a tiny model). Each model is
# sharded both ways and run eager; it is compiled after one way of sharding per degree (the compiled graph does not
# depend on how the weights were sharded), so that both ways are compiled across the two launches.
@needs_dist
@pytest.mark.slow
@pytest.mark.parametrize("tp,compiled_way", [(2, "enable_parallelism"), (4, "from_pretrained")])
def test_tensor_parallel_transformers_match_cpu(tp, compiled_way):
    import hf_diffusers_tp
    r = hf_diffusers_tp.main(["--tp", str(tp), "--compile-ways", compiled_way])
    rows = r["rows"]
    models = hf_diffusers_tp.planned_classes()
    expected = {(m, w, mode, rank) for m in models for w in hf_diffusers_tp.WAYS for rank in range(tp)
                for mode in (("eager", "compiled") if w == compiled_way else ("eager",))}
    assert {(x["model"], x["way"], x["mode"], x["rank"]) for x in rows} == expected
    assert all("error" not in x and x["diff"] <= 1e-4 and x["device"] == f"neuron:{x['rank']}" for x in rows), rows
    assert all(x["sharded"] > 0 for x in rows)
    assert r["image_diff"] <= 1e-4


def test_every_transformer_with_a_cp_plan_has_a_tiny_config():
    """The CP test below covers every class of the installed Diffusers that plans context parallelism."""
    import hf_diffusers_cp
    planned = hf_diffusers_cp.planned_classes()
    assert {"FluxTransformer2DModel", "Flux2Transformer2DModel", "QwenImageTransformer2DModel", "WanTransformer3DModel",
            "ChronoEditTransformer3DModel", "HeliosTransformer3DModel", "LTXVideoTransformer3DModel",
            "LTX2VideoTransformer3DModel", "MiniMaxH3Transformer3DModel"} <= set(planned)
    assert set(planned) <= set(hf_diffusers_cp.TINY), set(planned) - set(hf_diffusers_cp.TINY)


# One torchrun running every case: each transformer with a _cp_plan, Ulysses and ring, sharded both ways and run
# eager, each compiled once (kinds and ways alternating from class to class, so both of each are compiled), the
# combinations Diffusers itself refuses (checked to fail with its message), and the MiniMax-H3 pipeline. Degree 4 is
# run by hand (docs/huggingface.md).
@needs_dist
@pytest.mark.slow
def test_context_parallel_transformers_and_minimax_h3_pipeline_match_cpu():
    import hf_diffusers_cp
    r = hf_diffusers_cp.main(["--cp", "2", "--compiled-runs", "once"])
    rows = [x for x in r["rows"] if "refusal" not in x and "pipeline" not in x]
    cases = hf_diffusers_cp.cases_of(hf_diffusers_cp.planned_classes())
    compiled = hf_diffusers_cp.compiled_runs(cases, list(hf_diffusers_cp.KINDS), "once")
    expected = set()
    for c in cases:
        for k in hf_diffusers_cp.KINDS:
            for w in hf_diffusers_cp.WAYS:
                is_compiled = (k, w) in compiled.get(c, [])
                if hf_diffusers_cp.refused_way(c, w) or (c in hf_diffusers_cp.VARIANTS and not is_compiled):
                    continue
                expected |= {(c, k, w, mode, rank) for mode in ("eager", "compiled")[:1 + is_compiled]
                             for rank in range(2)}
    assert {(x["model"], x["kind"], x["way"], x["mode"], x["rank"]) for x in rows} == expected
    assert all("error" not in x and x["diff"] <= 1e-4 and x["device"] == f"neuron:{x['rank']}" for x in rows), rows
    assert all(x["graphs"] == 1 and x["graph_breaks"] == 0 for x in rows if x["mode"] == "compiled"), rows
    compiled_kinds = {(x["kind"], x["way"]) for x in rows if x["mode"] == "compiled"}
    assert {k for k, _ in compiled_kinds} == set(hf_diffusers_cp.KINDS)
    assert {w for _, w in compiled_kinds} == set(hf_diffusers_cp.WAYS)
    refused = {(x["refusal"], x["rank"]) for x in r["rows"] if "refusal" in x}
    assert refused == {(i, rank) for i in range(len(hf_diffusers_cp.REFUSALS)) for rank in range(2)}
    pipeline = [x for x in r["rows"] if "pipeline" in x]
    assert {(x["kind"], x["rank"]) for x in pipeline} == {(k, rank) for k in hf_diffusers_cp.KINDS for rank in range(2)}
    assert all(max(x["diff"].values()) <= 1e-4 and x["transformer"].startswith("neuron") for x in pipeline), pipeline
