"""Diffusers on neuron (examples/hf_diffusers.py, examples/hf_diffusers_tp.py): tiny Flux and UNet pipelines,
saved and loaded like real ones, eager and compiled on neuron equal CPU; every transformer with a tensor-parallel
plan (Flux, Flux2, QwenImage, QwenImage-2.1), sharded over 2 and 4 ranks both ways, eager and compiled, equals one
CPU process; so does the image of a Flux pipeline whose transformer is sharded."""

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
