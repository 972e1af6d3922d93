"""One architecture's checks, run in a process of its own.

    python -m torch_neuronx.compat.worker ARCH --mode both --out result.json

The CPU runs first and is the reference; the same weights then run on
neuron. Steps:

  forward            logits allclose to CPU
  backward           every parameter's grad allclose to CPU
  generate-eager     16 greedy tokens (static cache where the model has one), equal to CPU's
  forward-compiled   as forward, through torch.compile(backend="neuron")  } one compiled training call
  backward-compiled  as backward, through the compiled model             } serves both (a compile is costly)
  generate-compiled  generate() as a user runs it on neuron: Transformers compiles the decode step itself
                     (backend "neuron", static shapes); tokens equal to CPU's

A compiled step that fails with a graph break, a recompile or a numeric
mismatch is then run on CPU, compiled by Inductor under the same rules
(_recheck_on_cpu): whether the model compiles cleanly anywhere.

The result file is rewritten after every step, with the step in progress
named in "running": if the process hangs or dies, the runner still knows
what passed and where it stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import sys
import time
import traceback
from typing import NamedTuple

EAGER_STEPS = ("forward", "backward", "generate-eager")
# A step that cannot be run here (generate() of a model class that cannot generate, or that fails on CPU too;
# a generate() Transformers does not compile): reported as not run, never as a pass.
NOT_RUN = "not run"
MOVING_TO_NEURON = "moving the model to neuron"  # what the worker is doing between the CPU reference and the first step
COMPILED_STEPS = ("forward-compiled", "backward-compiled", "generate-compiled")
STEPS = EAGER_STEPS + COMPILED_STEPS

# float32 tolerances. Both sides run the same host kernels, so most results
# are bit-identical; the margin covers kernel choices that may differ by
# device (e.g. the sdpa backend) and compiled graphs that fuse differently.
LOGITS_ATOL, LOGITS_RTOL = 1e-4, 1e-3
GRAD_ATOL, GRAD_RTOL = 1e-4, 1e-3
NEW_TOKENS = 16
BATCH, PROMPT_LEN = 2, 8
# Recompiles tolerated within one compiled step: the decode loop of a static
# cache must reuse one graph (a recompile per token is what this matrix is
# there to catch).
RECOMPILE_BUDGET = 0
# ... except one: a static sliding-window cache has two decode paths, while the window fills and once
# it is full (Transformers' `is_full`), so it is two graphs, as on Neuron. That recompile is allowed
# when Dynamo's guard is the fill test (`cumulative_length_int <= N`), never a per-value guard (`== N`).


def window_fill_recompiles(reasons: list[str]) -> int:
    """How many of the recompile reasons are the sliding window filling up (at most one is allowed)."""
    from torch_neuronx.integrations.transformers_sliding_window import is_window_fill_guard
    return sum(1 for r in reasons if is_window_fill_guard(r))


class Result:
    """The worker's report, persisted after every change."""

    def __init__(self, path: str, arch: str, mode: str):
        self.path = path
        self.data = {"arch": arch, "mode": mode, "model_class": None, "cpu": {"status": "running"},
                     "cache": None, "steps": {}, "compile": {}, "running": None, "seconds": {}}
        self.save()

    def save(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, default=str)
        os.replace(tmp, self.path)  # atomic: the runner never reads half a file

    def running(self, what: str | None) -> None:
        self.data["running"] = what
        self.save()

    def step(self, name: str, status: str, **info) -> None:
        self.data["steps"][name] = {"status": status, **{k: v for k, v in info.items() if v is not None}}
        self.data["running"] = None
        self.save()


def _inputs(model, device: str):
    import torch
    text = model.config.get_text_config(decoder=True)
    vocab = getattr(text, "vocab_size", None) or 128
    # audio decoders (MusicGen) take one row of codes per codebook
    rows = BATCH * (getattr(text, "num_codebooks", None) or 1)
    g = torch.Generator().manual_seed(1234)
    # ids above the usual special tokens (0-2) and below a tiny vocab
    ids = torch.randint(3, min(int(vocab), 128), (rows, PROMPT_LEN), generator=g)
    return ids.to(device), torch.ones_like(ids).to(device)


def _accepts(fn, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _logits(out):
    return out.logits if hasattr(out, "logits") else out[0]


def run_forward(model, call, device: str):
    import torch
    ids, mask = _inputs(model, device)
    kwargs = {"input_ids": ids}
    if _accepts(model.forward, "attention_mask"):
        kwargs["attention_mask"] = mask
    with torch.no_grad():
        return _logits(call(**kwargs)).float().cpu()


def run_backward(model, call, device: str, with_logits: bool = False, use_labels: bool = True):
    """Grads of a language-modelling loss (the model's own, from labels, where it has one)."""
    ids, mask = _inputs(model, device)
    model.zero_grad(set_to_none=True)
    kwargs = {"input_ids": ids}
    if _accepts(model.forward, "attention_mask"):
        kwargs["attention_mask"] = mask
    if use_labels and _accepts(model.forward, "labels"):
        kwargs["labels"] = ids
    out = call(**kwargs)
    loss = getattr(out, "loss", None)
    if loss is None:
        loss = _logits(out).float().pow(2).mean()
    loss.backward()
    grads = {n: (p.grad.detach().float().cpu() if p.grad is not None else None) for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    if with_logits:
        return _logits(out).detach().float().cpu(), grads
    return grads


def tied_parameters(model) -> int:
    """How many parameter names share a Parameter with another name (tied embeddings and kin)."""
    names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    return len(names) - len({id(p) for p in model.parameters()})


def run_generate(model, device: str, cache: str | None, compiled: bool, compile_config=None):
    ids, mask = _inputs(model, device)
    kwargs = {"input_ids": ids, "max_new_tokens": NEW_TOKENS, "min_new_tokens": NEW_TOKENS, "do_sample": False,
              "pad_token_id": 0}
    if _accepts(model.forward, "attention_mask"):
        kwargs["attention_mask"] = mask
    if cache:
        kwargs["cache_implementation"] = cache
    if getattr(model.generation_config, "pad_token_id", None) is None:
        model.generation_config.pad_token_id = 0  # models with their own generate() (MusicGen) read it there
    if not compiled:
        # on neuron Transformers would compile the decode step by itself
        kwargs["disable_compile"] = True
    elif compile_config is not None:
        kwargs["compile_config"] = compile_config
    out = model.generate(**kwargs)
    seqs = out.sequences if hasattr(out, "sequences") else out
    return seqs.cpu()


class Comparison(NamedTuple):
    """A neuron result against CPU's: whether it passes, the largest difference, why not, and NaN both share."""
    ok: bool
    diff: float
    detail: str = ""
    nan: str | None = None  # "NaN in the same N place(s) on CPU and neuron": a pass the report shows as such


def compare_tensors(ref, got, atol: float, rtol: float, what: str, side: str = "neuron") -> Comparison:
    """`got` (from `side`) allclose to CPU's `ref`. NaN passes only where CPU has NaN too, in exactly the same
    places, and the comparison says so (`nan`); NaN on one side only is a mismatch, wherever it is."""
    import torch
    if ref.shape != got.shape:
        return Comparison(False, float("inf"), f"{what} shape {tuple(got.shape)} != CPU {tuple(ref.shape)}")
    ref_nan, got_nan = ref.isnan(), got.isnan()
    if not torch.equal(ref_nan, got_nan):
        extra, missing = got_nan & ~ref_nan, ref_nan & ~got_nan
        worse = extra if extra.any() else missing
        where = tuple(worse.nonzero()[0].tolist())
        text = (f"NaN on {side} in {int(extra.sum())} place(s) where CPU has a number" if extra.any() else
                f"NaN on CPU in {int(missing.sum())} place(s) where {side} has a number")
        return Comparison(False, float("nan"), f"{what}: {text}, first at {where}")
    diff = (ref - got).abs().nan_to_num(0.0).max().item() if ref.numel() else 0.0
    both = int(ref_nan.sum())
    nan = f"NaN in the same {both} place(s) on CPU and {side}" if both else None
    if not torch.allclose(ref, got, atol=atol, rtol=rtol, equal_nan=True):  # NaN masks are equal by now
        return Comparison(False, diff, f"{what} differ{'s' if what.startswith('grad') else ''}: max |diff| "
                                       f"{diff:.3g} (atol {atol}, rtol {rtol})", nan)
    return Comparison(True, diff, "", nan)


def compare_logits(ref, got) -> Comparison:
    return compare_tensors(ref, got, LOGITS_ATOL, LOGITS_RTOL, "logits")


def compare_grads(ref: dict, got: dict, side: str = "neuron") -> Comparison:
    worst, nans = 0.0, []
    for name, r in ref.items():
        g = got.get(name)
        if (r is None) != (g is None):
            return Comparison(False, float("inf"), f"grad of {name} is {'missing' if g is None else 'unexpected'} "
                                                   f"on {side}")
        if r is None:
            continue
        c = compare_tensors(r, g, GRAD_ATOL, GRAD_RTOL, f"grad of {name}", side)
        if not c.ok:
            return c
        worst = max(worst, c.diff)
        if c.nan:
            nans.append(f"{c.nan} (grad of {name})")
    return Comparison(True, worst, "", "; ".join(nans) or None)


def compare_tokens(ref, got) -> tuple[bool, str]:
    import torch
    if ref.shape != got.shape:
        return False, f"generated shape {tuple(got.shape)} != CPU {tuple(ref.shape)}"
    if torch.equal(ref, got):
        return True, ""
    first = (ref != got).nonzero()[0].tolist()
    return False, f"tokens differ from CPU at (row, position) {tuple(first)}"


class CpuReference:
    """The CPU results every neuron step is compared with."""

    def __init__(self, arch: str, result: Result, want_generate: bool):
        import torch
        self.arch = arch
        result.running("cpu")
        t0 = time.monotonic()
        self.model = self.build_model()
        result.data["model_class"] = type(self.model).__name__
        self.logits = run_forward(self.model, self.model, "cpu")
        self.use_labels = True
        try:
            self.grads = run_backward(self.model, self.model, "cpu")
        except Exception as e:  # noqa: BLE001 - a model whose loss needs more than text (GIT: image tokens)
            from .categories import first_line
            self.use_labels = False
            self.grads = run_backward(self.model, self.model, "cpu", use_labels=False)
            result.data["loss_note"] = f"own loss (mean square of logits): the model's loss fails on CPU: {first_line(e)}"
        self.can_generate = want_generate and type(self.model).can_generate()
        self.generate_note = "the model class cannot generate()"
        self.cache, self.cache_note, self.tokens = None, None, None
        if self.can_generate:
            self.cache, self.cache_note = self._choose_cache()
            try:
                self.tokens = run_generate(self.model, "cpu", self.cache, compiled=False)
            except Exception as e:  # noqa: BLE001 - forward and backward still count; generate is n/a
                from .categories import first_line
                self.can_generate = False
                self.generate_note = f"generate() fails on CPU too: {first_line(e)}"
                self.cache_note = None
        result.data["cache"] = self.cache or "default"
        if self.cache_note:
            result.data["cache_note"] = self.cache_note
        result.data["seconds"]["cpu"] = round(time.monotonic() - t0, 2)
        torch.manual_seed(0)

    def _choose_cache(self) -> tuple[str | None, str | None]:
        """"static" where the model supports it; else the model's default cache (and why)."""
        model = self.model
        if hasattr(model, "_supports_default_dynamic_cache") and not model._supports_default_dynamic_cache():
            return None, "the model manages its own cache (recurrent state)"
        try:
            run_generate(model, "cpu", "static", compiled=False)
            return "static", None
        except Exception as e:  # noqa: BLE001 - any failure means "no static cache for this model"
            from .categories import first_line
            return None, f"static cache fails on CPU: {first_line(e)}"

    def fresh_copy(self):
        """A new CPU model with the same weights, in the state a new model is in (rebuilt, then loaded).

        Not the reference model itself: running it may have changed more than weights (BigBird switches
        its attention type for short inputs on the first forward).
        """
        model = self.build_model()
        model.load_state_dict(self.model.state_dict())
        return model

    def build_model(self):
        """A new CPU model of the architecture (random weights, the tiny config of architectures.py)."""
        from .architectures import build_model
        return build_model(self.arch)

    def neuron_copy(self):
        """The same weights on neuron (a fresh copy: no aliasing with the CPU model)."""
        model = self.fresh_copy().to("neuron")
        self.untied = tied_parameters(self.model) - tied_parameters(model)
        return model


def _train_compiled(ref: CpuReference, model, shared: dict, backend="neuron", device: str = "neuron") -> None:
    """One compiled training call (forward with grad, then backward) for both forward- and backward-compiled.

    One call instead of two: a compile costs tens of seconds, and the logits of a
    training forward are the inference logits. Inference graphs are compiled by
    generate-compiled.
    """
    import torch
    from . import compile_counters
    with compile_counters.counting_from_scratch() as shared["counts"]:
        call = torch.compile(model, backend=backend)
        shared["logits"], shared["grads"] = run_backward(model, call, device, with_logits=True,
                                                         use_labels=ref.use_labels)


def _compile_verdict(counts, expected_recompiles: int = 0) -> tuple[str | None, str]:
    """(category, detail) when a compiled step broke its graph or recompiled; (None, "") otherwise.

    expected_recompiles: recompiles the caller knows are by construction (a Diffusers pipeline whose two
    denoisers are one class of two sizes: the second instance is a new graph of the same code)."""
    from .categories import GRAPH_BREAK, RECOMPILE
    if counts.graph_breaks > 0:
        return GRAPH_BREAK, f"{counts.graph_breaks} graph break(s): " + "; ".join(counts.break_reasons[:2])
    budget = RECOMPILE_BUDGET + expected_recompiles
    if counts.recompiles > budget + min(window_fill_recompiles(counts.recompile_reasons), 1):
        return RECOMPILE, (f"{counts.recompiles} recompile(s) (budget {budget}): "
                           + "; ".join(counts.recompile_reasons[:2]))
    return None, ""


def _run_neuron_step(name: str, ref: CpuReference, model, result: Result, shared: dict) -> None:
    """Run one neuron step and record its verdict; `shared` carries the compiled training call between steps."""
    from . import compile_counters, same_failure
    from .categories import NUMERIC, failure_info

    if name.startswith("generate") and not ref.can_generate:
        result.step(name, NOT_RUN, detail=ref.generate_note)
        return
    result.running(name)
    t0 = time.monotonic()
    counts = None
    try:
        if name == "forward":
            c = compare_logits(ref.logits, run_forward(model, model, "neuron"))
        elif name == "backward":
            c = compare_grads(ref.grads, run_backward(model, model, "neuron", use_labels=ref.use_labels))
        elif name in ("forward-compiled", "backward-compiled"):
            counts = shared.get("counts")
            if "error" in shared:  # the shared compiled call already failed: same error for both steps
                raise shared["error"]
            if "counts" not in shared:
                _train_compiled(ref, model, shared)
                result.data["compile"]["forward+backward-compiled"] = shared["counts"].__dict__
            counts = shared["counts"]
            if name == "forward-compiled":
                c = compare_logits(ref.logits, shared["logits"])
            else:
                c = compare_grads(ref.grads, shared["grads"])
        else:
            compiled = name == "generate-compiled"
            with compile_counters.counting_from_scratch() if compiled else contextlib.nullcontext() as counts:
                if compiled:
                    result.data["compile"][name] = vars(counts)  # filled in when generate() ends, or raises
                tokens = run_generate(model, "neuron", ref.cache, compiled=compiled)
            ok, detail = compare_tokens(ref.tokens, tokens)
            c = Comparison(ok, None, detail)
            shared[name + ":tokens"] = tokens
            if compiled and ok and counts.graphs == 0:
                result.step(name, NOT_RUN, seconds=round(time.monotonic() - t0, 2),
                            detail="Transformers does not compile this model's generate() (no compileable cache): "
                                   "its tokens were made uncompiled")
                return
        category, detail = (None, "") if c.ok else (NUMERIC, c.detail)
        if not c.ok and name.startswith("backward") and getattr(ref, "untied", 0) > 0:
            detail += (f" ({ref.untied} tied parameter(s) of the CPU model are separate Parameters after "
                       ".to('neuron'): their grads are split)")
        if c.ok and counts is not None:
            category, detail = _compile_verdict(counts)
        result.step(name, "pass" if category is None else "fail", category=category, error=detail or None,
                    max_abs_diff=c.diff, nan=c.nan, seconds=round(time.monotonic() - t0, 2),
                    signature=same_failure.signature(category, counts) if category else None)
    except Exception as e:  # noqa: BLE001 - every failure is a result to report
        if name == "forward-compiled":
            shared["error"] = e
        info = failure_info(e)
        result.step(name, "fail", **info,
                    seconds=round(time.monotonic() - t0, 2), traceback=traceback.format_exc(limit=-6),
                    signature=same_failure.signature(info["category"], counts, e))


# A compiled step can fail on neuron for reasons of the model's own: its code breaks the graph
# (`.tolist()`, `nonzero`, logging), its inputs force a recompile per step, or its compiled numbers
# differ from its eager ones. Such a step is run again on CPU, compiled by Inductor under the same
# rules (compat/cpu_reference.py). The same failure there (and, for numbers, the same numbers as
# neuron's) means the architecture does not compile cleanly on any device: the step stays a failure,
# marked `cpu_too`, and the report lists the architecture apart from the compiled percentage.
RECHECK_ON_CPU = ("graph break", "recompile", "numeric mismatch")


def _recheck_on_cpu(ref: CpuReference, result: Result, shared: dict) -> None:
    """Run the compiled steps again on a fresh CPU copy, compiled by Inductor, if one failed as a model can.

    The copy goes through the same steps as the neuron model did, in the same order (eager steps
    included) up to the last failed one, so that a model whose state changes as it runs is compared
    in the same state.
    """
    import torch
    from . import compile_counters, cpu_reference, same_failure
    from .categories import NUMERIC, classify, first_line

    steps = result.data["steps"]
    failed = [s for s in COMPILED_STEPS if steps.get(s, {}).get("status") == "fail"
              and steps[s].get("category") in RECHECK_ON_CPU]
    if not failed:
        return
    result.running("the failed compiled steps on CPU, compiled by Inductor")
    twin = ref.fresh_copy()
    torch.manual_seed(0)  # as before the neuron steps
    replay = [s for s in STEPS if s in steps and steps[s].get("status") not in (NOT_RUN, "n/a")]
    cpu: dict = {}  # the CPU's compiled training call, shared by forward- and backward-compiled
    for name in replay[:replay.index(failed[-1]) + 1]:
        same_as_neuron, counts, error = True, None, None
        try:
            if name == "forward":
                run_forward(twin, twin, "cpu")
                continue
            if name == "backward":
                run_backward(twin, twin, "cpu", use_labels=ref.use_labels)
                continue
            if name == "generate-eager":
                run_generate(twin, "cpu", ref.cache, compiled=False)
                continue
            if name in ("forward-compiled", "backward-compiled"):
                counts = cpu.get("counts")
                if "error" in cpu:
                    raise cpu["error"]
                if "counts" not in cpu:
                    _train_compiled(ref, twin, cpu, backend=cpu_reference.inductor_cpu, device="cpu")
                counts = cpu["counts"]
                if name == "forward-compiled":
                    ok, _, detail, _ = compare_logits(ref.logits, cpu["logits"])
                    same_as_neuron = "logits" in shared and compare_logits(cpu["logits"], shared["logits"]).ok
                else:
                    ok, _, detail, _ = compare_grads(ref.grads, cpu["grads"], side="CPU compiled")
                    same_as_neuron = "grads" in shared and compare_grads(cpu["grads"], shared["grads"]).ok
            else:
                with compile_counters.counting_from_scratch() as counts:
                    tokens = run_generate(twin, "cpu", ref.cache, compiled=True,
                                          compile_config=cpu_reference.generate_compile_config())
                ok, detail = compare_tokens(ref.tokens, tokens)
                neuron_tokens = shared.get(name + ":tokens")
                same_as_neuron = neuron_tokens is not None and torch.equal(tokens, neuron_tokens)
            category = None if ok else NUMERIC
            if ok:
                category, detail = _compile_verdict(counts)
        except Exception as e:  # noqa: BLE001 - a CPU failure is an answer too
            if name not in COMPILED_STEPS:
                continue  # an eager step is replayed for the model's state only (it passed in the reference)
            if name == "forward-compiled":
                cpu["error"] = e
            category, detail, error = classify(e), first_line(e), e
        if name not in failed:
            continue
        _judge_cpu_recheck(steps[name], category, detail, same_failure.signature(category, counts, error),
                           same_as_neuron)
        result.save()
    torch._dynamo.reset()


def _judge_cpu_recheck(step: dict, category: str | None, detail: str, signature: dict, same_numbers: bool) -> None:
    """Record the CPU recheck of a failed compiled step (both suites): `cpu_too` only for the same failure there
    (compat/same_failure.py; for numbers, also CPU's compiled numbers equal to neuron's), else what differs."""
    from . import same_failure
    from .categories import NUMERIC
    step["cpu_compiled"] = {"status": "pass" if category is None else "fail", "category": category,
                            "error": detail or None, "signature": signature if category else None}
    if category is None:
        return
    differs = same_failure.differences(step.get("signature") or {"category": step.get("category")}, signature)
    if not differs and category == NUMERIC and not same_numbers:
        differs = ["numbers: CPU's compiled numbers differ from neuron's"]
    if differs:
        step["cpu_differs"] = "; ".join(differs)
    else:
        step["cpu_too"] = True


def run(arch: str, mode: str, out: str, reference: type[CpuReference] = CpuReference) -> int:
    result = Result(out, arch, mode)
    steps = {"eager": EAGER_STEPS, "compiled": COMPILED_STEPS, "both": STEPS}[mode]
    import torch  # noqa: F401 - loads torch_neuronx (autoload)
    import transformers
    transformers.logging.set_verbosity_error()
    from .categories import classify, cpu_failure, first_line
    try:
        ref = reference(arch, result, want_generate=any(s.startswith("generate") for s in steps))
    except Exception as e:  # noqa: BLE001 - the architecture cannot run here at all
        result.data["cpu"] = cpu_failure(e)
        result.running(None)
        return 0
    result.data["cpu"] = {"status": "pass"}
    # On disk before the neuron side starts: if moving the model segfaults or hangs, the runner must find a
    # reference that passed, and count the death against neuron (not as a CPU failure).
    result.running(MOVING_TO_NEURON)
    try:
        model = ref.neuron_copy()
    except Exception as e:  # noqa: BLE001
        for name in steps:
            result.step(name, "fail", category=classify(e), error="moving the model to neuron: " + first_line(e))
        result.running(None)
        return 0
    shared: dict = {}
    for name in steps:
        _run_neuron_step(name, ref, model, result, shared)
    _recheck_on_cpu(ref, result, shared)
    result.running(None)
    return 0


def main(argv: list[str] | None = None, reference: type[CpuReference] = CpuReference) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arch")
    parser.add_argument("--mode", choices=("eager", "compiled", "both"), default="both")
    parser.add_argument("--out", required=True, help="result JSON file")
    args = parser.parse_args(argv)
    return run(args.arch, args.mode, args.out, reference)


def run_as_script(reference: type[CpuReference] = CpuReference) -> None:
    """The worker process: `python -m <worker module> ARCH --mode M --out FILE`.

    A worker module of its own (`torchneuron compat --worker MODULE`) calls this with a CpuReference
    subclass that builds or copies models differently.
    """
    # exit without tearing down the interpreter: some models leave threads/handles that
    # make a normal shutdown slow, and the result is already on disk
    code = main(reference=reference)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run_as_script()
