"""The Diffusers matrix's Markdown report (compat/report.py writes it, with the JSON, for a Diffusers run).

Verdicts, summary lines and merging are compat/report.py's (one set of rules for both suites); this file
only lays out what differs: a row per pipeline class with its family, the output compared, and the
pipeline classes not built here with the reason.
"""

from __future__ import annotations

from .. import categories, charts, provenance, report

DISTRIBUTIONS = ("torch-neuronx", "torch", "diffusers", "transformers")
MODES = ("eager", "compiled")


def _escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _cell(step: dict | None) -> str:
    if not step:
        return "not run"
    if step.get("status") == "fail":
        return f"**FAIL** ({step.get('category') or categories.ERROR}{', CPU too' if step.get('cpu_too') else ''})"
    if step.get("tolerance_from"):
        return f"{step.get('status', '')} (widened: atol {step['atol']:.2g}, CPU compile's rounding)"
    return step.get("status", "")


def _family_rates(results: dict[str, dict], mode: str) -> dict[str, float]:
    """Pass rate (percent) of each family in `mode`, over its pipelines that pass on CPU."""
    fams: dict[str, list[bool]] = {}
    for r in results.values():
        if report.cpu_passes(r) and report.ran(r, mode):
            fams.setdefault(r.get("family", "other"), []).append(report.compatible(r, mode))
    return {f: 100.0 * sum(v) / len(v) for f, v in sorted(fams.items())}


def to_markdown(results: dict[str, dict], date: str | None = None, vers: dict | None = None,
                runs: list[dict] | None = None) -> str:
    from .worker import ATOL, COMPILE_ROUNDING_CAP, RTOL
    vers = vers or report.versions(DISTRIBUTIONS)
    mode_list = [m for m in MODES if any(report.ran(r, m) for r in results.values())]
    built = [a for a, r in results.items() if not report.not_built(r)]
    lines = provenance.header("Compatibility matrix: Diffusers pipelines on neuron", runs or [], results, vers)
    lines += [f"{len(results)} pipeline classes; {len(built)} built from tiny components and run, "
              f"{len(results) - len(built)} not built here (listed at the end, with the reason).", "",
              f"Fixed tolerance: atol {ATOL:g}, rtol {RTOL:g} on outputs in [0, 1], against CPU eager. A compiled output "
              "outside it may pass within twice the distance the denoiser compiled on CPU by Inductor moves from CPU "
              f"eager in the same run, at most {COMPILE_ROUNDING_CAP:.3g} (1/255): such a pass is counted apart in the "
              "summary (the rate at the fixed tolerance alone) and listed under \"passed only within a widened "
              "tolerance\".", ""]
    lines += ["```"] + [report.summarize(results, m).line() for m in mode_list] + ["```", ""]
    for m in mode_list:
        lines += charts.pie(f"{m}: {len(built)} pipelines run",
                            {k: v for k, v in report.outcomes({a: results[a] for a in built}, m).items()}) + [""]
        rates = _family_rates(results, m)
        if len(rates) > 1:
            lines += charts.bars(f"{m}: pass rate by family (%)", rates, "percent") + [""]

    cols = ["pipeline", "family", "output"] + mode_list + (["max diff (compiled)", "graphs", "recompiles",
                                                            "graph breaks"] if "compiled" in mode_list else [])
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name in sorted(built):
        r = results[name]
        if not report.cpu_passes(r):
            cat = r["cpu"].get("category", categories.CPU_FAILS)
            lines.append(f"| {name} | {r.get('family', '')} | _{cat}_ | " + " | ".join([""] * (len(cols) - 3)) + " |")
            continue
        row = [name, r.get("family", ""), "x".join(map(str, r["cpu"].get("output_shape", [])))]
        row += [_cell(r["steps"].get(m)) for m in mode_list]
        if "compiled" in mode_list:
            step = r["steps"].get("compiled", {})
            c = r.get("compile", {}).get("compiled", {})
            diff = step.get("max_abs_diff")
            row += [f"{diff:.2g}" if isinstance(diff, (int, float)) else "", str(c.get("graphs", "")),
                    str(c.get("recompiles", "")), str(c.get("graph_breaks", ""))]
        lines.append("| " + " | ".join(row) + " |")

    lines += [""] + report.failure_sections(results)
    if "compiled" in mode_list:
        lines += ["", "## Not counted in compiled mode: the same failure compiled on CPU", "",
                  "The denoiser of these pipelines failed the same way when Inductor compiled it on CPU under the "
                  "same rules (the same category, graph breaks and recompiles in count and reasons, exception type "
                  "and ops, and for numbers the same numbers as neuron's): it does not compile cleanly on any "
                  "device.", ""]
        lines += [f"- `{a}` {step}: {_escape(err)} (CPU: {_escape(cpu_err)})"
                  for a, step, err, cpu_err in report.compiled_on_cpu_too(results)] or ["None."]
    if "compiled" in mode_list:
        widened = [(a, r["steps"]["compiled"]) for a, r in sorted(results.items())
                   if report.cpu_passes(r) and report.widened(r, "compiled")]
        lines += ["", "## Compiled: passed only within a widened tolerance", "",
                  f"Outside the fixed tolerance (atol {ATOL:g}), a compiled output is held to twice the distance between "
                  "CPU eager and the denoiser compiled by Inductor on CPU in the same run (at most 1/255, one 8-bit "
                  "pixel level): compiling moves the numbers by rounding on any device, and some pipelines "
                  "magnify it. At the fixed tolerance alone these rows would fail.", ""]
        lines += [f"- `{a}`: max |diff| {s.get('max_abs_diff', 0):.3g}; {_escape(s['tolerance_from'])}"
                  for a, s in widened] or ["None."]
    cpu = [(a, r) for a, r in sorted(results.items()) if not report.cpu_passes(r) and not report.not_built(r)]
    lines += ["", "## Not counted: the pipeline fails on CPU too", ""]
    lines += [f"- `{a}` ({r['cpu'].get('category')}): {_escape(r['cpu'].get('error', ''))}" for a, r in cpu] \
        or ["None."]
    skipped = [(a, r) for a, r in sorted(results.items()) if report.not_built(r)]
    lines += ["", "## Not built here", ""]
    by_reason: dict[tuple[str, str], list[str]] = {}
    for a, r in skipped:
        by_reason.setdefault((r["cpu"].get("category", ""), r["cpu"].get("error", "")), []).append(a)
    for (cat, why), names in sorted(by_reason.items()):
        lines.append(f"- {cat} ({len(names)}): {_escape(why)}: " + ", ".join(f"`{n}`" for n in names))
    if not skipped:
        lines.append("None.")
    return "\n".join(lines) + "\n"
