"""Diffusers on neuron (examples/hf_diffusers.py, examples/hf_diffusers_tp.py): tiny Flux and UNet pipelines,
saved and loaded like real ones, eager and compiled on neuron equal CPU; Flux tensor-parallel over 2 and 4 ranks
equals the single-process CPU image."""

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


@needs_dist
@pytest.mark.slow
@pytest.mark.parametrize("tp,load_sharded", [(2, False), (4, True)])
def test_flux_tensor_parallel_matches_cpu(flux_path, tp, load_sharded):
    import hf_diffusers_tp
    argv = ["--tp", str(tp), "--path", flux_path] + (["--load-sharded"] if load_sharded else [])
    r = hf_diffusers_tp.main(argv)
    assert r["diff"] <= 1e-4, r["diff"]
    assert "sharded parameters" in r["log"]
