"""One Diffusers pipeline's checks, run in a process of its own (the runner starts one per pipeline).

    python -m torch_neuronx.compat.pipelines.worker FluxPipeline --mode both --out result.json

The pipeline is built from tiny components under a fixed seed and run on CPU: the reference output
(images, video frames, audio, latents or token ids). It is built again (same weights) and run on neuron:

  eager     the whole pipeline on neuron, output allclose to CPU's
  compiled  the same, its denoiser (unet / transformer / ..., DENOISERS) compiled with torch.compile(backend="neuron"),
            as users do (`pipe.transformer.compile(...)`); no graph break, no recompile across steps

A compiled failure that a model's own code can cause (graph break, recompile, numbers) is run again on
CPU, the denoiser compiled by Inductor under the neuron backend's rules (compat/cpu_reference.py): the
same failure there (compat/same_failure.py: category, graph breaks and recompiles in count and reasons,
exception type and ops) means the pipeline does not compile cleanly on any device (`cpu_too`).

Compiled numbers are judged against what compiling does to this pipeline anywhere (compiled_tolerance):
a compiled graph fuses and reorders float math, so its output moves from eager's by rounding, and a
pipeline can magnify that (an inpainting blend, a guidance scale). When the compiled output is outside
the fixed tolerance, the tolerance becomes twice the CPU compile's own distance from CPU eager, measured
in the same run, capped at one 8-bit pixel level (1/255): neuron compiled passes if it moves no more
than Inductor on CPU does. Beyond one pixel level the CPU compile changes the picture itself; a neuron
output equal to it is then `cpu_too`, as any other failure the CPU compile shares. A pass within the widened
tolerance is marked (`tolerance_from`): the report counts and lists it apart from passes at the fixed one.

The result file is the Transformers worker's (compat/worker.py: Result), rewritten after every step.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
import traceback

import numpy as np

STEPS = {"eager": ("eager",), "compiled": ("compiled",), "both": ("eager", "compiled")}
# Pixel values are in [0, 1]. Both sides run the same host kernels, so eager outputs are mostly
# bit-identical; the margin covers compiled graphs that fuse differently, over two denoising steps.
ATOL, RTOL = 1e-4, 1e-3
# The widest tolerance a compiled output gets from the CPU compile's own rounding: one level of an 8-bit image.
COMPILE_ROUNDING_CAP = 1 / 255
# the models a compiled run compiles: the denoisers (prior_prior: of a combined pipeline; image_unet: Versatile
# Diffusion's; model: the language model of a text-diffusion pipeline), or the pipeline's one model where it has no
# denoiser (the latent upsampler, Flux Redux's embedder)
DENOISERS = ("unet", "transformer", "transformer_2", "unconditional_transformer", "prior", "decoder", "prior_prior",
             "image_unet", "model", "diffusion_decoder", "latent_upsampler", "image_embedder")


def build(name: str):
    """(pipeline class, its components), built from the recipe under a fixed seed: the same weights each call."""
    import torch
    from .builders import DIFFUSERS_WRITTEN_FOR, RECIPES
    from .registry import import_error, pipeline_classes
    if name not in pipeline_classes():
        raise import_error(name)
    cls = pipeline_classes()[name]
    torch.manual_seed(0)
    comps = RECIPES[name].components()
    params = inspect.signature(cls.__init__).parameters
    extra = sorted(set(comps) - set(params))
    if extra:
        import diffusers
        raise TypeError(f"{name}.__init__ takes no {', '.join(extra)}: the recipe was written for Diffusers "
                        f"{DIFFUSERS_WRITTEN_FOR}, this is {diffusers.__version__} (update compat/pipelines/builders.py)")
    for module in comps.values():  # as from_pretrained returns them: dropout off (a random draw is not comparable)
        if isinstance(module, torch.nn.Module):
            module.eval()
    for p, spec in params.items():
        if p in comps or p == "self" or spec.kind in (spec.VAR_KEYWORD, spec.VAR_POSITIONAL):
            continue
        if p == "requires_safety_checker":
            comps[p] = False
        elif spec.default is inspect.Parameter.empty:
            comps[p] = None  # optional models (safety checker, feature extractor, image encoder): left out
    return cls, comps


class PipelineBuild:
    """How the worker makes a pipeline: built from its recipe (`build`), then moved to a device. A worker module of
    its own (`torchneuron compat --suite diffusers --worker MODULE`) calls run_as_script with a subclass (the tool's
    tests inject real failures so)."""

    def __init__(self, name: str):
        self.name = name

    def build(self):
        return build(self.name)

    def to_device(self, pipe, device: str):
        return pipe.to(device)


def denoisers(pipe) -> dict:
    import torch
    return {n: getattr(pipe, n) for n in DENOISERS if isinstance(getattr(pipe, n, None), torch.nn.Module)}


def run_pipeline(source: PipelineBuild, device: str, compile_backend=None, compiled: dict | None = None) -> np.ndarray:
    """Build the pipeline, move it to `device`, optionally compile its denoisers (named in `compiled` if given), run
    it once: the output array."""
    import torch
    from .builders import RECIPES
    from .inputs import as_array, call_kwargs
    name = source.name
    cls, comps = source.build()
    pipe = cls(**comps)
    pipe = source.to_device(pipe, device)
    pipe.set_progress_bar_config(disable=True)
    if compile_backend is not None:
        found = denoisers(pipe)
        if not found:
            raise LookupError(f"{name} has none of {', '.join(DENOISERS)} to compile")
        for module in found.values():
            module.compile(backend=compile_backend, dynamic=False)
        if compiled is not None:
            compiled.update(found)
    recipe = RECIPES[name]
    kwargs = call_kwargs(getattr(cls, recipe.method), recipe.size, recipe.call)
    for arg in recipe.on_device:  # inputs the pipeline uses where they are, as a user passes them: on its device
        value = kwargs[arg]  # a tensor, or a list of them (ConsisID's id_vit_hidden)
        kwargs[arg] = [v.to(device) for v in value] if isinstance(value, list) else value.to(device)
    with torch.no_grad():
        out = getattr(pipe, recipe.method)(**kwargs)
    return as_array(out)


def compare(ref: np.ndarray, got: np.ndarray, atol: float = ATOL) -> tuple[bool, float, str]:
    if ref.shape != got.shape:
        return False, float("inf"), f"output shape {got.shape} != CPU {ref.shape}"
    diff = max_abs_diff(ref, got)
    # The CPU reference never holds NaN (run() refuses it), so any NaN here is the other side's and fails.
    ok = bool(np.allclose(ref, got, atol=atol, rtol=RTOL, equal_nan=False))
    if ok:
        return True, diff, ""
    nan = int(np.isnan(got).sum())
    return False, diff, (f"output differs: max |diff| {diff:.3g} (atol {atol:.3g}, rtol {RTOL})"
                         + (f", NaN in {nan} place(s) where CPU has a number" if nan else ""))


def max_abs_diff(ref: np.ndarray, got: np.ndarray) -> float:
    return float(np.nan_to_num(np.abs(ref - got), nan=np.inf).max()) if ref.size else 0.0


def compiled_tolerance(cpu_diff: float) -> float:
    """The atol a compiled output is held to: the fixed one, or twice the CPU compile's distance from CPU eager,
    `cpu_diff` (what compiling this pipeline does to its numbers by rounding alone), at most one 8-bit pixel level.
    An infinite distance (the CPU compile's output has another shape) widens nothing."""
    if not np.isfinite(cpu_diff):
        return ATOL
    return max(ATOL, min(2 * cpu_diff, COMPILE_ROUNDING_CAP))


def same_class_instances(modules: dict) -> int:
    """Compiled modules beyond the first of their class. Each is one recompile by construction: Dynamo compiles a
    class's forward once and guards on its parameters' shapes, so a second instance of other sizes (Stable
    Cascade's prior and decoder, both StableCascadeUNet) is a recompile of that code, one graph per model."""
    return len(modules) - len({type(m) for m in modules.values()})


def _compiled(source: PipelineBuild, backend, device: str, counting: dict):
    """(output, recompiles expected by construction) of a run with the denoisers compiled by `backend`; the compile
    counts go into counting["counts"] (also when the run raises)."""
    from .. import compile_counters
    modules: dict = {}
    with compile_counters.counting_from_scratch() as counting["counts"]:
        out = run_pipeline(source, device, compile_backend=backend, compiled=modules)
    return out, same_class_instances(modules)


def _step(source: PipelineBuild, step: str, ref: np.ndarray, result, shared: dict) -> None:
    from .. import same_failure
    from ..categories import NUMERIC, failure_info
    from ..worker import _compile_verdict
    result.running(step)
    t0 = time.monotonic()
    counting: dict = {}
    try:
        if step == "eager":
            got = run_pipeline(source, "neuron")
        else:
            got, expected = _compiled(source, "neuron", "neuron", counting)
            result.data["compile"]["compiled"] = vars(counting["counts"]) | {"expected_recompiles": expected}
            shared["compiled"], shared["counts"], shared["expected"] = got, counting["counts"], expected
        ok, diff, detail = compare(ref, got)
        category = None if ok else NUMERIC
        if ok and "counts" in counting:
            category, detail = _compile_verdict(counting["counts"], shared["expected"])
        result.step(step, "pass" if category is None else "fail", category=category, error=detail or None,
                    max_abs_diff=diff, seconds=round(time.monotonic() - t0, 2),
                    signature=same_failure.signature(category, counting.get("counts")) if category else None)
    except Exception as e:  # noqa: BLE001 - every failure is a result to report
        info = failure_info(e)
        result.step(step, "fail", **info, seconds=round(time.monotonic() - t0, 2),
                    traceback=traceback.format_exc(limit=-6),
                    signature=same_failure.signature(info["category"], counting.get("counts"), e))


def _recheck_on_cpu(source: PipelineBuild, ref: np.ndarray, result, shared: dict) -> None:
    """The compiled step failed as a model can: compile the denoiser on CPU (Inductor, same rules) and compare.

    A numeric mismatch within the CPU compile's own rounding (compiled_tolerance) is a pass, listed apart."""
    from .. import cpu_reference, same_failure
    from ..categories import NUMERIC, classify, first_line
    from ..worker import RECHECK_ON_CPU, _compile_verdict, _judge_cpu_recheck
    step = result.data["steps"].get("compiled", {})
    if step.get("status") != "fail" or step.get("category") not in RECHECK_ON_CPU:
        return
    result.running("the compiled step on CPU, compiled by Inductor")
    same_as_neuron = True
    cpu_diff, error, counting = None, None, {}
    try:
        got, expected = _compiled(source, cpu_reference.inductor_cpu, "cpu", counting)
        ok, cpu_diff, detail = compare(ref, got)
        category = None if ok else NUMERIC
        if ok:
            category, detail = _compile_verdict(counting["counts"], expected)
        elif "compiled" in shared:
            same_as_neuron = compare(got, shared["compiled"])[0]
        if step["category"] == NUMERIC and "compiled" in shared:
            _within_compile_rounding(ref, cpu_diff, shared, step)
    except Exception as e:  # noqa: BLE001 - a CPU failure is an answer too
        category, detail, error = classify(e), first_line(e), e
    if step["status"] == "fail":
        _judge_cpu_recheck(step, category, detail, same_failure.signature(category, counting.get("counts"), error),
                           same_as_neuron)
    else:  # passed within the CPU compile's rounding: the CPU compile is the measure, not a verdict
        step["cpu_compiled"] = {"status": "pass" if category is None else "fail", "category": category,
                                "error": detail or None}
    step["cpu_compiled"]["max_abs_diff"] = cpu_diff
    result.save()


def _within_compile_rounding(ref: np.ndarray, cpu_diff: float, shared: dict, step: dict) -> None:
    """Pass the neuron compiled step if its output is within the tolerance the CPU compile sets (`cpu_diff`: its
    distance from CPU eager) and its graph is clean: the numbers were the only complaint so far."""
    from ..worker import _compile_verdict
    atol = compiled_tolerance(cpu_diff)
    ok, _, _ = compare(ref, shared["compiled"], atol)
    if not ok or atol == ATOL:
        return
    category, detail = _compile_verdict(shared["counts"], shared["expected"])
    step.update(status="pass" if category is None else "fail", category=category, error=detail or None,
                atol=atol, tolerance_from=f"CPU compiled (Inductor) differs from CPU eager by "
                                          f"{cpu_diff:.3g}: atol {atol:.3g}")


def run(name: str, mode: str, out: str, build_with: type[PipelineBuild] = PipelineBuild) -> int:
    from ..worker import Result
    result = Result(out, name, mode)
    result.data.update(suite="diffusers")
    import torch  # noqa: F401 - loads torch_neuronx (autoload)
    import diffusers
    import transformers
    diffusers.utils.logging.set_verbosity_error()
    transformers.logging.set_verbosity_error()
    from ..categories import cpu_failure
    from .registry import family
    result.data["family"] = family(name)
    result.running("cpu")
    t0 = time.monotonic()
    source = build_with(name)
    try:
        ref = run_pipeline(source, "cpu")
        if np.isnan(ref).any():  # NaN equals NaN in the comparison: such an output would pass without checking
            raise FloatingPointError(f"{name} on CPU output NaN: its tiny components are degenerate (fix the recipe)")
    except Exception as e:  # noqa: BLE001 - the pipeline cannot run here at all
        result.data["cpu"] = cpu_failure(e)
        result.running(None)
        return 0
    result.data["cpu"] = {"status": "pass", "output_shape": list(ref.shape)}
    result.data["seconds"]["cpu"] = round(time.monotonic() - t0, 2)
    shared: dict = {}
    for step in STEPS[mode]:
        _step(source, step, ref, result, shared)
    _recheck_on_cpu(source, ref, result, shared)
    result.running(None)
    return 0


def main(argv: list[str] | None = None, build_with: type[PipelineBuild] = PipelineBuild) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pipeline")
    parser.add_argument("--mode", choices=tuple(STEPS), default="both")
    parser.add_argument("--out", required=True, help="result JSON file")
    args = parser.parse_args(argv)
    return run(args.pipeline, args.mode, args.out, build_with)


def run_as_script(build_with: type[PipelineBuild] = PipelineBuild) -> None:
    """The worker process: `python -m <worker module> PIPELINE --mode M --out FILE` (a worker module of its own calls
    this with its PipelineBuild subclass)."""
    code = main(build_with=build_with)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the result is on disk: skip a slow interpreter teardown


if __name__ == "__main__":
    run_as_script()
