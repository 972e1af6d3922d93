"""The matrix's verdicts, summary lines, JSON and Markdown.

An architecture counts only if it passes on CPU (the reference exists): one
that fails there too is listed with its reason, outside the percentage. It is
compatible in a mode when every step of that mode passed on neuron ("n/a",
e.g. generate() of a model class that cannot generate, counts as passed).

Compiled mode holds the same rule one level down: an architecture whose every
compiled failure recurs when Inductor compiles it on CPU under the same rules
(the worker's `cpu_too`: a graph break in the model's code, say) does not pass
compiled on CPU either. It is listed apart, outside the compiled percentage,
and the summary line also gives the percentage that counts it as failed.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass

from . import categories, charts
from .worker import COMPILED_STEPS, EAGER_STEPS

# The steps of each mode, by suite: Transformers architectures (compat/worker.py) and Diffusers pipelines
# (compat/pipelines/worker.py). A result names its suite; one without is an architecture's.
SUITE_STEPS = {"transformers": {"eager": EAGER_STEPS, "compiled": COMPILED_STEPS},
               "diffusers": {"eager": ("eager",), "compiled": ("compiled",)}}
MODE_STEPS = SUITE_STEPS["transformers"]
OK = ("pass", "n/a")


def steps_of(result: dict, mode: str) -> tuple[str, ...]:
    """The steps of `mode` for the result's suite."""
    return SUITE_STEPS[result.get("suite", "transformers")][mode]


def first_failed_step(result: dict, mode: str) -> str:
    return next(s for s in steps_of(result, mode) if result["steps"].get(s, {}).get("status") not in OK)


def cpu_passes(result: dict) -> bool:
    return result.get("cpu", {}).get("status") == "pass"


def ran(result: dict, mode: str) -> bool:
    """Whether the result has the steps of `mode` (a merged report may hold one mode for some architectures)."""
    return any(s in result.get("steps", {}) for s in steps_of(result, mode))


def compatible(result: dict, mode: str) -> bool:
    """Every step of `mode` passed on neuron (the architecture must pass on CPU)."""
    return cpu_passes(result) and all(result["steps"].get(s, {}).get("status") in OK for s in steps_of(result, mode))


def fails_compiled_on_cpu_too(result: dict) -> bool:
    """Compiled mode failed on neuron, and each failed compiled step failed the same way compiled on CPU."""
    if not cpu_passes(result) or not ran(result, "compiled") or compatible(result, "compiled"):
        return False
    steps = [result["steps"].get(s, {}) for s in steps_of(result, "compiled")]
    return all(s.get("status") in OK or s.get("cpu_too") for s in steps)


def counted_failure(result: dict, mode: str) -> bool:
    """A failure of `mode` that the percentage counts (the plugin's side)."""
    return cpu_passes(result) and ran(result, mode) and not compatible(result, mode) \
        and not (mode == "compiled" and fails_compiled_on_cpu_too(result))


def modes_run(results: dict[str, dict]) -> list[str]:
    """The modes present in the results (a run with --mode eager has no compiled steps)."""
    return [m for m in MODE_STEPS if any(ran(r, m) for r in results.values())] or \
        [m for m in MODE_STEPS if any(r.get("mode") in (m, "both") for r in results.values())]


@dataclass
class Summary:
    mode: str
    compatible: int  # N: CPU-passing architectures whose every step of the mode passed on neuron
    cpu_passing: int  # M: architectures that pass on CPU (and ran in this mode)
    total: int  # architectures in the results
    cpu_failing: int  # not counted: they fail on CPU too
    not_run: int = 0  # CPU-passing architectures without this mode's steps (a partial run)
    cpu_compiled_failing: int = 0  # compiled mode: not counted, they fail the same way compiled on CPU
    noun: str = "architectures"  # what the matrix counts (pipelines for Diffusers)
    not_built: int = 0  # of cpu_failing: Diffusers pipelines not built here (no recipe, missing package, hub-only asset)

    @property
    def percent(self) -> float:
        return 100.0 * self.compatible / self.cpu_passing if self.cpu_passing else 0.0

    @property
    def percent_counting_all(self) -> float:
        """The percentage if the architectures that fail compiled on CPU too counted as failures."""
        n = self.cpu_passing + self.cpu_compiled_failing
        return 100.0 * self.compatible / n if n else 0.0

    def line(self) -> str:
        extra = f"; {self.not_run} not run in this mode" if self.not_run else ""
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
    return Summary(mode, sum(compatible(r, mode) for r in counted), len(counted), len(results),
                   len(results) - len(passing), len(passing) - len(ran_mode), len(cpu_too), noun, unbuilt)


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
                out.setdefault(cat, []).append((arch, step, s.get("error", "")))
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


def to_json(results: dict[str, dict], args: dict | None = None, vers: dict | None = None) -> dict:
    return {"date": datetime.date.today().isoformat(), "versions": vers or versions(), "args": args or {},
            "summary": {m: _summary_json(summarize(results, m)) for m in modes_run(results)},
            "results": results}


def _cell(step: dict | None) -> str:
    if not step:
        return "not run"
    status = step.get("status")
    if status == "fail":
        category = step.get("category") or categories.ERROR
        return f"**FAIL** ({category}{', CPU too' if step.get('cpu_too') else ''})"
    return status


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(results: dict[str, dict], date: str | None = None, vers: dict | None = None) -> str:
    date = date or datetime.date.today().isoformat()
    vers = vers or versions()
    mode_list = modes_run(results)
    lines = [f"Run on {date} with " + ", ".join(f"{k} {v}" for k, v in vers.items()) + ".", ""]
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

    fails = failures(results)
    lines += ["", "## Failures on neuron, by category", ""]
    if not fails:
        lines.append("None.")
    for cat in sorted(fails, key=lambda c: (-len(fails[c]), c)):
        lines.append(f"### {cat} ({len(fails[cat])})")
        lines.append("")
        for arch, step, err in fails[cat]:
            lines.append(f"- `{arch}` {step}: {_escape(err)}")
        lines.append("")
    lines.append("")
    notes = [(a, r[k]) for a, r in sorted(results.items()) if cpu_passes(r)
             for k in ("cache_note", "loss_note") if r.get(k)]
    notes += [(a, f"generate n/a: {r['steps'][s]['detail']}") for a, r in sorted(results.items()) if cpu_passes(r)
              for s in ("generate-eager",) if r["steps"].get(s, {}).get("status") == "n/a"
              and "fails on CPU" in r["steps"][s].get("detail", "")]
    if notes:
        lines += ["## How some architectures were run", ""]
        lines += [f"- `{arch}`: {_escape(note)}" for arch, note in notes]
        lines.append("")
    if "compiled" in mode_list:
        lines += ["## Not counted in compiled mode: the same failure compiled on CPU", "",
                  "Each failed compiled step of these architectures failed the same way when Inductor compiled "
                  "the model on CPU under the same rules (static shapes, same recompile budget; numbers equal to "
                  "neuron's): the model does not compile cleanly on any device.", ""]
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


def write(results: dict[str, dict], out_dir: str, args: dict | None = None) -> tuple[str, str]:
    """Write compat.json and compat.md into `out_dir` (the Markdown of the results' suite); returns their paths."""
    import os
    os.makedirs(out_dir, exist_ok=True)
    diffusers = any(r.get("suite") == "diffusers" for r in results.values())
    if diffusers:
        from .pipelines import report as pipeline_report
        markdown, vers = pipeline_report.to_markdown, versions(pipeline_report.DISTRIBUTIONS)
    else:
        markdown, vers = to_markdown, versions()
    doc = to_json(results, args, vers)
    jpath, mpath = os.path.join(out_dir, "compat.json"), os.path.join(out_dir, "compat.md")
    with open(jpath, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    with open(mpath, "w") as f:
        f.write(markdown(results, doc["date"], doc["versions"]))
    return jpath, mpath


def merge(into: dict[str, dict], new: dict[str, dict]) -> dict[str, dict]:
    """Results of two runs (say an eager run and a compiled one) as one: per step, the newer result wins."""
    out = {a: json.loads(json.dumps(r)) for a, r in into.items()}
    for arch, r in new.items():
        old = out.get(arch)
        if old is None or not cpu_passes(old) or not cpu_passes(r):
            out[arch] = r if old is None or cpu_passes(r) or not cpu_passes(old) else old
            continue
        old["steps"].update(r.get("steps", {}))
        old.setdefault("compile", {}).update(r.get("compile", {}))
        old["mode"] = "both" if old.get("mode") != r.get("mode") else r.get("mode")
        for key in ("cache", "cache_note", "loss_note", "model_class"):
            if r.get(key) is not None:
                old[key] = r[key]
        old["seconds"] = {**old.get("seconds", {}), **{f"{r.get('mode')}:{k}": v for k, v in r.get("seconds", {}).items()}}
    return out


def load(path: str) -> dict[str, dict]:
    """Results from a compat.json (to merge runs done in chunks)."""
    with open(path) as f:
        return json.load(f)["results"]
