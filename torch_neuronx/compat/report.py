"""The matrix's verdicts, summary lines, JSON and Markdown.

An architecture counts only if it passes on CPU (the reference exists): one
that fails there too is listed with its reason, outside the percentage. It is
compatible in a mode when every step of that mode ran and passed on neuron. A
step that could not run (generate() of a model class that cannot generate, or
that fails on CPU too; a generate() Transformers does not compile) is "not
run": never a pass, so its architecture is not compatible either, nor a
failure; the summary gives how many passed every step that ran and how many
steps did not run. A pass with NaN on both sides (in the same places) is listed
as such.

Compiled mode holds the same rule one level down: an architecture whose every
compiled failure recurs as the same failure when Inductor compiles it on CPU
under the same rules (the worker's `cpu_too`: the same graph breaks in the
model's code, say; compat/same_failure.py) does not pass compiled on CPU
either. It is listed apart, outside the compiled percentage, and the summary
line also gives the percentage that counts it as failed.

Rows carry the commit they were run at and when they finished
(compat/provenance.py): merging runs keeps, per step, the newer result, so an
older pass never hides a newer failure.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass

from . import categories, charts, provenance
from .paths import relative_paths_in
from .worker import COMPILED_STEPS, EAGER_STEPS, LOGITS_ATOL, LOGITS_RTOL, NOT_RUN

# The steps of each mode, by suite: Transformers architectures (compat/worker.py) and Diffusers pipelines
# (compat/pipelines/worker.py). A result names its suite; one without is an architecture's.
SUITE_STEPS = {"transformers": {"eager": EAGER_STEPS, "compiled": COMPILED_STEPS},
               "diffusers": {"eager": ("eager",), "compiled": ("compiled",)}}
MODE_STEPS = SUITE_STEPS["transformers"]
NOT_RUN_STATUSES = (NOT_RUN, "n/a")  # "n/a": reports written before "not run" named such steps


def steps_of(result: dict, mode: str) -> tuple[str, ...]:
    """The steps of `mode` for the result's suite."""
    return SUITE_STEPS[result.get("suite", "transformers")][mode]


def _statuses(result: dict, mode: str) -> list[str]:
    """The status of each step of `mode` (a step without a record did not run)."""
    return [result["steps"].get(s, {}).get("status", NOT_RUN) for s in steps_of(result, mode)]


def first_failed_step(result: dict, mode: str) -> str:
    """The first step of `mode` that failed (else the first that did not pass)."""
    steps = steps_of(result, mode)
    return next((s for s, st in zip(steps, _statuses(result, mode)) if st == "fail"),
                next((s for s, st in zip(steps, _statuses(result, mode)) if st != "pass"), steps[0]))


def cpu_passes(result: dict) -> bool:
    return result.get("cpu", {}).get("status") == "pass"


def ran(result: dict, mode: str) -> bool:
    """Whether the result has the steps of `mode` (a merged report may hold one mode for some architectures)."""
    return any(s in result.get("steps", {}) for s in steps_of(result, mode))


def compatible(result: dict, mode: str) -> bool:
    """Every step of `mode` ran and passed on neuron (the architecture must pass on CPU)."""
    return cpu_passes(result) and all(st == "pass" for st in _statuses(result, mode))


def failed(result: dict, mode: str) -> bool:
    """A step of `mode` failed on neuron (the architecture passes on CPU)."""
    return cpu_passes(result) and ran(result, mode) and "fail" in _statuses(result, mode)


def incomplete(result: dict, mode: str) -> bool:
    """Nothing of `mode` failed, but a step did not run: neither compatible nor a failure."""
    return cpu_passes(result) and ran(result, mode) and not failed(result, mode) and not compatible(result, mode)


def not_run_steps(result: dict, mode: str) -> list[str]:
    return [s for s, st in zip(steps_of(result, mode), _statuses(result, mode)) if st in NOT_RUN_STATUSES]


def fails_compiled_on_cpu_too(result: dict) -> bool:
    """Compiled mode failed on neuron, and each failed compiled step failed the same way compiled on CPU."""
    if not failed(result, "compiled"):
        return False
    steps = [result["steps"].get(s, {}) for s in steps_of(result, "compiled")]
    return all(s.get("cpu_too") for s in steps if s.get("status") == "fail")


def counted_failure(result: dict, mode: str) -> bool:
    """A failure of `mode` that the percentage counts (the plugin's side)."""
    return failed(result, mode) and not (mode == "compiled" and fails_compiled_on_cpu_too(result))


def modes_run(results: dict[str, dict]) -> list[str]:
    """The modes present in the results (a run with --mode eager has no compiled steps)."""
    return [m for m in MODE_STEPS if any(ran(r, m) for r in results.values())] or \
        [m for m in MODE_STEPS if any(r.get("mode") in (m, "both") for r in results.values())]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def nan_steps(result: dict, mode: str) -> list[str]:
    """Steps of `mode` that passed with NaN in the same places on CPU and neuron."""
    return [s for s in steps_of(result, mode) if result["steps"].get(s, {}).get("nan")]


def widened(result: dict, mode: str) -> bool:
    """Compatible in `mode` only through a tolerance wider than the fixed one (Diffusers compiled: the CPU
    compile's own rounding, pipelines/worker.py compiled_tolerance)."""
    return compatible(result, mode) and any(result["steps"].get(s, {}).get("tolerance_from")
                                            for s in steps_of(result, mode))


@dataclass
class Summary:
    mode: str
    compatible: int  # N: CPU-passing architectures whose every step of the mode ran and passed on neuron
    cpu_passing: int  # M: architectures that pass on CPU (and ran in this mode)
    total: int  # architectures in the results
    cpu_failing: int  # not counted: they fail on CPU too
    not_run: int = 0  # CPU-passing architectures without this mode's steps (a partial run)
    cpu_compiled_failing: int = 0  # compiled mode: not counted, they fail the same way compiled on CPU
    noun: str = "architectures"  # what the matrix counts (pipelines for Diffusers)
    not_built: int = 0  # of cpu_failing: Diffusers pipelines not built here (no recipe, missing package, hub-only asset)
    incomplete: int = 0  # of M: nothing failed, but a step did not run (neither compatible nor a failure)
    steps_not_run: int = 0  # the steps those did not run
    nan_both: int = 0  # of N: passed with NaN in the same places on CPU and neuron
    widened: int = 0  # of N: passed only within a tolerance wider than the fixed one

    @property
    def percent(self) -> float:
        return 100.0 * self.compatible / self.cpu_passing if self.cpu_passing else 0.0

    @property
    def percent_counting_all(self) -> float:
        """The percentage if the architectures that fail compiled on CPU too counted as failures."""
        n = self.cpu_passing + self.cpu_compiled_failing
        return 100.0 * self.compatible / n if n else 0.0

    @property
    def percent_fixed_tolerance(self) -> float:
        """The percentage if only passes within the fixed tolerance counted."""
        return 100.0 * (self.compatible - self.widened) / self.cpu_passing if self.cpu_passing else 0.0

    def line(self) -> str:
        extra = f"; {self.not_run} not run in this mode" if self.not_run else ""
        if self.incomplete:
            extra += (f"; {self.incomplete} passed every step that ran but {_plural(self.steps_not_run, 'step')} "
                      "did not run (not counted as passes)")
        if self.nan_both:
            extra += f"; {self.nan_both} passed with NaN in the same places on CPU and neuron (listed)"
        if self.widened:
            extra += (f"; {self.widened} passed only within a widened tolerance: "
                      f"{self.compatible - self.widened}/{self.cpu_passing} ({self.percent_fixed_tolerance:.1f}%) at "
                      "the fixed tolerance")
        if self.cpu_compiled_failing:
            extra += (f"; {self.cpu_compiled_failing} fail the same way compiled on CPU (Inductor): not counted, "
                      f"counting them {self.compatible}/{self.cpu_passing + self.cpu_compiled_failing} "
                      f"({self.percent_counting_all:.1f}%)")
        built = f", {self.not_built} not built here" if self.not_built else ""
        return (f"{self.mode:8s} compatible: {self.compatible}/{self.cpu_passing} ({self.percent:.1f}%)"
                f"  [{self.cpu_failing - self.not_built} of {self.total} {self.noun} fail on CPU too{built}: "
                f"not counted{extra}]")


def summarize(results: dict[str, dict], mode: str) -> Summary:
    passing = [r for r in results.values() if cpu_passes(r)]
    ran_mode = [r for r in passing if ran(r, mode)]
    cpu_too = [r for r in ran_mode if mode == "compiled" and fails_compiled_on_cpu_too(r)]
    counted = [r for r in ran_mode if not (mode == "compiled" and fails_compiled_on_cpu_too(r))]
    noun = "pipelines" if any(r.get("suite") == "diffusers" for r in results.values()) else "architectures"
    unbuilt = sum(1 for r in results.values() if not_built(r))
    partial = [r for r in counted if incomplete(r, mode)]
    passed = [r for r in counted if compatible(r, mode)]
    return Summary(mode, len(passed), len(counted), len(results), len(results) - len(passing),
                   len(passing) - len(ran_mode), len(cpu_too), noun, unbuilt, len(partial),
                   sum(len(not_run_steps(r, mode)) for r in partial), sum(1 for r in passed if nan_steps(r, mode)),
                   sum(1 for r in passed if widened(r, mode)))


def not_built(result: dict) -> bool:
    """A Diffusers pipeline the matrix did not build (no recipe, a missing package, an asset only the hub has)."""
    return result.get("built") is False


def outcomes(results: dict[str, dict], mode: str) -> dict[str, int]:
    """How every architecture ended in `mode`: compatible, a failure category, or not counted (and why)."""
    out: dict[str, int] = {"compatible": 0}
    for r in results.values():
        if not cpu_passes(r):
            category = r.get("cpu", {}).get("category") or categories.CPU_FAILS
            label = f"{'fails on CPU too' if category == categories.CPU_FAILS else category} (not counted)"
        elif not ran(r, mode):
            label = "not run in this mode"
        elif compatible(r, mode):
            label = "compatible"
        elif incomplete(r, mode):
            label = "passed the steps that ran (some not run)"
        elif mode == "compiled" and fails_compiled_on_cpu_too(r):
            label = "fails compiled on CPU too (not counted)"
        else:
            label = r["steps"].get(first_failed_step(r, mode), {}).get("category") or "not run"
        out[label] = out.get(label, 0) + 1
    return out


def failures(results: dict[str, dict]) -> dict[str, list[tuple[str, str, str]]]:
    """category -> [(arch, step, first error line)] for neuron failures (the plugin's side)."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for arch, r in results.items():
        if not cpu_passes(r):
            continue
        compiled = steps_of(r, "compiled")
        for step in steps_of(r, "eager") + compiled:
            s = r["steps"].get(step)
            if s and s.get("status") == "fail" and not (step in compiled and fails_compiled_on_cpu_too(r)):
                cat = s.get("category") or categories.ERROR
                error = s.get("error", "")
                if s.get("cpu_differs"):
                    error += f" (compiled on CPU: {s['cpu_compiled']['category']} too, not the same failure: " \
                             f"{s['cpu_differs']})"
                out.setdefault(cat, []).append((arch, step, error))
    return out


def compiled_on_cpu_too(results: dict[str, dict]) -> list[tuple[str, str, str, str]]:
    """(arch, step, neuron's error, CPU's error) for the architectures that fail compiled on CPU too."""
    return [(a, step, r["steps"][step].get("error", ""), (r["steps"][step].get("cpu_compiled") or {}).get("error") or "")
            for a, r in sorted(results.items()) if fails_compiled_on_cpu_too(r)
            for step in steps_of(r, "compiled") if r["steps"].get(step, {}).get("status") == "fail"]


def not_plugin(results: dict[str, dict]) -> list[tuple[str, str, str]]:
    """(arch, category, reason) for architectures that fail on CPU too."""
    return [(a, r["cpu"].get("category", categories.CPU_FAILS), r["cpu"].get("error", ""))
            for a, r in results.items() if not cpu_passes(r)]


def not_run(results: dict[str, dict], mode_list: list[str]) -> list[tuple[str, str, str]]:
    """(arch, step, why) for every step that did not run in a row where nothing failed (the others' later steps
    did not run because of the failure, which the report lists)."""
    return [(a, step, r["steps"].get(step, {}).get("detail") or r["steps"].get(step, {}).get("error") or "")
            for a, r in sorted(results.items()) for m in mode_list if incomplete(r, m) for step in not_run_steps(r, m)]


def nan_passes(results: dict[str, dict], mode_list: list[str]) -> list[tuple[str, str, str]]:
    """(arch, step, where) for every step that passed with NaN in the same places on CPU and neuron."""
    return [(a, step, r["steps"][step]["nan"]) for a, r in sorted(results.items()) if cpu_passes(r)
            for m in mode_list for step in nan_steps(r, m)]


def versions(dists: tuple[str, ...] = ("torch-neuronx", "torch", "transformers")) -> dict[str, str]:
    import importlib.metadata as md
    import platform
    out = {}
    for dist in dists:
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = "not installed"
    out["python"] = platform.python_version()
    return out


def _summary_json(summary: Summary) -> dict:
    return summary.__dict__ | {"percent": round(summary.percent, 2),
                               "percent_counting_all": round(summary.percent_counting_all, 2)}


def to_json(results: dict[str, dict], args: dict | None = None, vers: dict | None = None,
            runs: list[dict] | None = None) -> dict:
    return {"date": datetime.date.today().isoformat(), "versions": vers or versions(), "args": args or {},
            "runs": runs or [], "summary": {m: _summary_json(summarize(results, m)) for m in modes_run(results)},
            "results": results}


def _cell(step: dict | None) -> str:
    if not step:
        return "not run"
    status = step.get("status")
    if status == "fail":
        category = step.get("category") or categories.ERROR
        return f"**FAIL** ({category}{', CPU too' if step.get('cpu_too') else ''})"
    if status in NOT_RUN_STATUSES:
        return NOT_RUN
    if step.get("nan"):
        return f"{status} (NaN on both sides)"
    return status


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(results: dict[str, dict], date: str | None = None, vers: dict | None = None,
                runs: list[dict] | None = None) -> str:
    vers = vers or versions()
    mode_list = modes_run(results)
    lines = provenance.header("Compatibility matrix: Transformers causal-LM architectures on neuron", runs or [],
                              results, vers)
    lines += [f"Tolerances: logits and grads allclose to CPU's (atol {LOGITS_ATOL}, rtol {LOGITS_RTOL}; NaN only where "
              "CPU has NaN in the same places, listed); generated tokens equal to CPU's. How each step is judged: "
              "docs/compat.md.", ""]
    lines += ["```"] + [summarize(results, m).line() for m in mode_list] + ["```", ""]
    for m in mode_list:
        lines += charts.pie(f"{m}: {len(results)} architectures", outcomes(results, m)) + [""]

    steps = [s for m in mode_list for s in MODE_STEPS[m]]
    cols = ["architecture"] + steps + (["recompiles", "graph breaks"] if "compiled" in mode_list else [])
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for arch, r in sorted(results.items()):
        if not cpu_passes(r):
            reason = r["cpu"].get("category", categories.CPU_FAILS)
            lines.append(f"| {arch} | " + " | ".join([f"_{reason}_"] + [""] * (len(cols) - 2)) + " |")
            continue
        row = [arch] + [_cell(r["steps"].get(s)) for s in steps]
        if "compiled" in mode_list:
            counts = r.get("compile", {}).values()
            row += ([str(sum(c.get("recompiles", 0) for c in counts)), str(sum(c.get("graph_breaks", 0) for c in counts))]
                    if counts else ["", ""])
        lines.append("| " + " | ".join(row) + " |")

    lines += [""] + failure_sections(results)
    notes = [(a, r[k]) for a, r in sorted(results.items()) if cpu_passes(r)
             for k in ("cache_note", "loss_note") if r.get(k)]
    if notes:
        lines += ["## How some architectures were run", ""]
        lines += [f"- `{arch}`: {_escape(note)}" for arch, note in notes]
        lines.append("")
    lines += nan_and_not_run_sections(results, mode_list)
    if "compiled" in mode_list:
        lines += ["## Not counted in compiled mode: the same failure compiled on CPU", "",
                  "Each failed compiled step of these architectures failed the same way when Inductor compiled "
                  "the model on CPU under the same rules (static shapes, same recompile budget): the same category, "
                  "the same graph breaks and recompiles (count and reasons), the same exception type and ops, and for "
                  "numbers the same numbers as neuron's. The model does not compile cleanly on any device.", ""]
        again = compiled_on_cpu_too(results)
        lines += [f"- `{a}` {step}: {_escape(err)} (CPU: {_escape(cpu_err)})" for a, step, err, cpu_err in again] \
            or ["None."]
        lines.append("")
    others = not_plugin(results)
    lines += ["## Not counted: the architecture fails on CPU too", ""]
    if not others:
        lines.append("None.")
    for arch, cat, err in others:
        lines.append(f"- `{arch}` ({cat}): {_escape(err)}")
    return "\n".join(lines) + "\n"


def failure_sections(results: dict[str, dict]) -> list[str]:
    """The report's failures on neuron, by category (both suites), with where a worker died."""
    fails = failures(results)
    lines = ["## Failures on neuron, by category", ""]
    if not fails:
        lines.append("None.")
    for cat in sorted(fails, key=lambda c: (-len(fails[c]), c)):
        lines += [f"### {cat} ({len(fails[cat])})", ""]
        lines += [f"- `{arch}` {step}: {_escape(err)}" for arch, step, err in fails[cat]] + [""]
    died = [(a, r["died_in"]) for a, r in sorted(results.items()) if r.get("died_in")]
    if died:
        lines += ["", "Workers that died (crash or timeout) while doing something other than a step; the step after "
                  "it is the one marked failed:", ""]
        lines += [f"- `{a}`: {_escape(what)}" for a, what in died]
    return lines + [""]


def nan_and_not_run_sections(results: dict[str, dict], mode_list: list[str]) -> list[str]:
    """The passes with NaN on both sides and the steps that did not run, each listed (both suites)."""
    lines = ["## Passed with NaN on both sides", "",
             "NaN on the neuron side passes only where CPU has NaN in exactly the same places (then the rest is "
             "compared as usual):", ""]
    lines += [f"- `{a}` {step}: {_escape(where)}" for a, step, where in nan_passes(results, mode_list)] or ["None."]
    lines += ["", "## Steps not run", "",
              "Not passes: these rows passed every step that ran, and are not counted as compatible.", ""]
    lines += [f"- `{a}` {step}: {_escape(why)}" for a, step, why in not_run(results, mode_list)] or ["None."]
    return lines + [""]


def write(results: dict[str, dict], out_dir: str, args: dict | None = None,
          runs: list[dict] | None = None) -> tuple[str, str]:
    """Write compat.json and compat.md into `out_dir` (the Markdown of the results' suite); returns their paths.

    Paths of this machine in errors, reasons and tracebacks are written relative (compat/paths.py)."""
    import os
    os.makedirs(out_dir, exist_ok=True)
    results = relative_paths_in(results)
    diffusers = any(r.get("suite") == "diffusers" for r in results.values())
    if diffusers:
        from .pipelines import report as pipeline_report
        markdown, vers = pipeline_report.to_markdown, versions(pipeline_report.DISTRIBUTIONS)
    else:
        markdown, vers = to_markdown, versions()
    doc = to_json(results, args, vers, runs)
    jpath, mpath = os.path.join(out_dir, "compat.json"), os.path.join(out_dir, "compat.md")
    with open(jpath, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    with open(mpath, "w") as f:
        f.write(markdown(results, doc["date"], doc["versions"], doc["runs"]))
    return jpath, mpath


def _newer(a: dict, b: dict) -> bool:
    """Was row `a` run after row `b`? By their stamps; a row without one (older reports) counts as the older."""
    ta, tb = provenance.row_finished(a), provenance.row_finished(b)
    return tb is None or ta is not None and ta >= tb


def merge(into: dict[str, dict], new: dict[str, dict]) -> dict[str, dict]:
    """Results of two runs (say an eager run and a compiled one) as one: per step, the newer result wins.

    Newer by the rows' stamps, whatever the order of the arguments (for rows without stamps: `new`): an older
    pass never replaces a newer failure, and a newer run that fails on CPU replaces the older row whole."""
    out = {a: json.loads(json.dumps(r)) for a, r in into.items()}
    for arch, r in new.items():
        old = out.get(arch)
        if old is None:
            out[arch] = json.loads(json.dumps(r))
            continue
        newer, older = (r, old) if _newer(r, old) else (old, r)
        if not cpu_passes(newer) or not cpu_passes(older):
            out[arch] = json.loads(json.dumps(newer))
            continue
        row = json.loads(json.dumps(older))
        row["steps"].update(newer.get("steps", {}))
        row.setdefault("compile", {}).update(newer.get("compile", {}))
        row["mode"] = "both" if older.get("mode") != newer.get("mode") else newer.get("mode")
        for key in ("cache", "cache_note", "loss_note", "model_class", "died_in"):
            if newer.get(key) is not None:
                row[key] = newer[key]
        row["seconds"] = {**older.get("seconds", {}),
                          **{f"{newer.get('mode')}:{k}": v for k, v in newer.get("seconds", {}).items()}}
        row["runs"] = older.get("runs", []) + [s for s in newer.get("runs", []) if s not in older.get("runs", [])]
        out[arch] = row
    return out


def load_doc(path: str) -> dict:
    """A compat.json: its results, and the runs that made them."""
    with open(path) as f:
        return json.load(f)


def load(path: str) -> dict[str, dict]:
    """Results from a compat.json (to merge runs done in chunks)."""
    return load_doc(path)["results"]
