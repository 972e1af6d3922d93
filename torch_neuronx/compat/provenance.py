"""Where a report's numbers come from: the commit, the dates, the versions, the wall time.

Every row a matrix run produces is stamped with the commit of the code that produced it (and whether that
code had uncommitted changes) and the time it finished; every run of the command adds an entry (suite,
mode, commit, start, end, wall time, versions, jobs, timeout) to the report's JSON. The Markdown report
opens with a header made from them, so a reader sees at once whether the numbers are one run at one
commit, or pieces of several (each commit is listed, with its rows).

MEASURED names the code each suite's numbers depend on: tests/test_compat_reports.py fails when a checked-in
report's commit is older than the last change to that code (`scripts/rerun_matrices.sh` regenerates them).
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import os
import subprocess

_COMMON = ("csrc", "torch_neuronx/compile", "torch_neuronx/integrations", "torch_neuronx/compat/worker.py",
           "torch_neuronx/compat/cpu_reference.py", "torch_neuronx/compat/categories.py",
           "torch_neuronx/compat/same_failure.py", "torch_neuronx/compat/paths.py",
           "torch_neuronx/compat/compile_counters.py", "torch_neuronx/compat/runner.py",
           "torch_neuronx/compat/report.py")
# The code a suite's numbers depend on: the plugin (csrc/), the compile backend and its shims, the workers and the
# rules that count (report.py). Not the progress line, the charts or the command line.
MEASURED = {"transformers": _COMMON + ("torch_neuronx/compat/architectures.py",),
            "diffusers": _COMMON + ("torch_neuronx/compat/pipelines",)}


@functools.lru_cache(maxsize=None)
def checkout() -> str | None:
    """The git work tree this torch_neuronx is imported from (None for an installed wheel)."""
    import torch_neuronx
    here = os.path.dirname(os.path.dirname(os.path.abspath(torch_neuronx.__file__)))
    top = _git(here, "rev-parse", "--show-toplevel")
    return top if top and os.path.samefile(top, here) else None


def _git(cwd: str, *args: str) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def measured_digest(suite: str, root: str | None = None) -> str | None:
    """A digest of the code the suite measures as committed at HEAD: sha256 over git's blob ids of every file
    under MEASURED[suite] (content-addressed, so it changes exactly when that code changes). It needs no history,
    so a shallow clone computes it too (None outside a checkout)."""
    root = root or checkout()
    if root is None:
        return None
    listing = _git(root, "ls-tree", "-r", "HEAD", "--", *MEASURED[suite])
    return None if listing is None else hashlib.sha256(listing.encode()).hexdigest()[:16]


def source_state(suite: str) -> dict:
    """{"commit": the checkout's HEAD (None outside a checkout), "dirty": whether the suite's measured code has
    uncommitted changes (a report made from it describes no commit), "measured": measured_digest at HEAD}."""
    root = checkout()
    if root is None:
        return {"commit": None, "dirty": None, "measured": None}
    status = _git(root, "status", "--porcelain", "--", *MEASURED[suite])
    return {"commit": _git(root, "rev-parse", "HEAD"), "dirty": bool(status),
            "measured": measured_digest(suite, root)}


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def row_stamp(state: dict, mode: str) -> dict:
    """What a finished row carries: the code it ran (state: source_state) and when it finished."""
    return {"commit": state.get("commit"), "dirty": state.get("dirty"), "measured": state.get("measured"),
            "mode": mode, "finished": now()}


def row_finished(result: dict) -> str | None:
    """When the newest part of a row was run (ISO time, comparable as text), None for rows from before stamps."""
    times = [r.get("finished") for r in result.get("runs", []) if r.get("finished")]
    return max(times) if times else None


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, m, s = seconds // 3600, seconds // 60 % 60, seconds % 60
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def commits(results: dict[str, dict]) -> dict[str, int]:
    """commit -> how many rows it produced (a row merged from two runs counts for each); "unknown" for rows
    without a stamp, "<commit> with uncommitted changes" for rows run from a modified checkout."""
    out: dict[str, int] = {}
    for r in results.values():
        stamps = r.get("runs") or [{}]
        for key in {(s.get("commit") or "unknown") + (" with uncommitted changes" if s.get("dirty") else "")
                    for s in stamps}:
            out[key] = out.get(key, 0) + 1
    return out


def header(title: str, runs: list[dict], results: dict[str, dict], versions: dict[str, str]) -> list[str]:
    """The Markdown report's opening: what was run, at which commit(s), when, with what, for how long."""
    built = [r for r in results.values() if r.get("runs")]
    lines = [f"# {title}", "", "Generated whole by `torchneuron compat` (`scripts/rerun_matrices.sh` runs every "
             "suite and mode at one commit); not edited by hand.", ""]
    by_commit = commits(results)
    if len(by_commit) == 1:
        (commit, _), = by_commit.items()
        lines.append(f"- commit: `{commit}` (every row)")
    else:
        lines.append("- commits: " + ", ".join(f"`{c}` ({n} rows)" for c, n in sorted(by_commit.items()))
                     + " (rows of several runs merged)")
    digests = sorted({s.get("measured") or "unknown" for r in built for s in r["runs"]})
    lines.append("- measured code: " + ", ".join(f"`{d}`" for d in digests)
                 + " (provenance.measured_digest: the code these rows measured, as committed)")
    days = sorted({r["started"][:10] for r in runs if r.get("started")} |
                  {s["finished"][:10] for r in built for s in r["runs"] if s.get("finished")})
    lines.append(f"- date: {days[0] if len(days) == 1 else ' to '.join((days[0], days[-1])) if days else 'unknown'}")
    lines.append("- versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    for r in runs:
        env = sorted({f"{k} {v}" for k, v in (r.get("versions") or {}).items()} - {f"{k} {v}" for k, v in versions.items()})
        lines.append(f"- run: `{r.get('command', 'torchneuron compat')}`, {r.get('rows', '?')} rows, "
                     f"{r.get('started', '?')} to {r.get('finished', '?')}, wall time "
                     f"{_duration(r.get('wall_seconds', 0))}"
                     + (f" (commit `{r['commit'][:12]}`)" if r.get("commit") and len(by_commit) > 1 else "")
                     + (f"; other versions: {', '.join(env)}" if env else ""))
    if len(runs) > 1:
        lines.append(f"- wall time in all: {_duration(sum(r.get('wall_seconds', 0) for r in runs))} over {len(runs)} runs")
    return lines + [""]
