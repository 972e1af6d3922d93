"""`torchneuron compat`: the command that runs the matrix and writes the report."""

from __future__ import annotations

import argparse
import os

from .runner import DEFAULT_TIMEOUT

ENVIRONMENT_ERROR = 3  # exit code: no worker could start (1: failures on neuron, 2: bad arguments)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compat", help="compatibility matrix of Transformers causal-LM architectures or Diffusers pipelines",
        description="Build a tiny random model of every causal-LM architecture in Transformers, run forward, "
                    "backward and greedy generate() on CPU and on neuron (eager and torch.compile), and write "
                    "OUT/compat.json and OUT/compat.md. With --suite diffusers: build every Diffusers pipeline "
                    "class that has a recipe from tiny components and compare its output on neuron (eager, and with "
                    "its denoiser compiled) with CPU's. Every row is stamped with the commit it ran at, the report's "
                    "header says which commits, when, with which versions and for how long. Exit code 1 if an item "
                    "that passes on CPU fails on neuron (also for --combine), 3 if the workers cannot start in this "
                    "environment.")
    p.add_argument("--suite", choices=("transformers", "diffusers"), default="transformers",
                   help="causal-LM architectures (default) or Diffusers pipelines")
    p.add_argument("--arch", nargs="+", metavar="NAME",
                   help="model_type(s) (default: all of them)")
    p.add_argument("--pipeline", nargs="+", metavar="NAME",
                   help="with --suite diffusers: pipeline class name(s) (default: all of them)")
    p.add_argument("--mode", choices=("eager", "compiled", "both"), default="both")
    p.add_argument("--jobs", type=int, default=1, help="architectures run at once (one process each; default 1)")
    p.add_argument("--out", default="compat-report", metavar="DIR", help="report directory (default ./compat-report)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                   help=f"seconds per architecture before it is reported as timeout (default {DEFAULT_TIMEOUT})")
    p.add_argument("--resume", action="store_true",
                   help="keep the architectures already in OUT/compat.json, run only the others, merge")
    p.add_argument("--merge", action="store_true",
                   help="run the architectures asked for and replace their rows in OUT/compat.json, keeping the rest")
    p.add_argument("--combine", nargs="+", metavar="DIR",
                   help="run nothing: merge the reports in DIR... (e.g. an eager and a compiled run) into OUT")
    p.add_argument("--list", action="store_true", help="list the architectures and exit")
    p.add_argument("--worker", metavar="MODULE",
                   help="the module each architecture's process runs (`python -m MODULE`; default "
                        "torch_neuronx.compat.worker): one that calls worker.run_as_script with its own "
                        "CpuReference subclass builds or copies models its way (the tool's tests inject real "
                        "failures so)")
    p.set_defaults(fn=main)


def _interrupt(signum, frame):
    """SIGTERM (a timeout, a kill) ends the run as Ctrl-C does: the runner then ends its workers."""
    raise KeyboardInterrupt


def _status_text(result: dict, modes: list[str]) -> str:
    from . import report
    if not report.cpu_passes(result):
        return f"[yellow]{result['cpu'].get('category')}[/yellow]: {result['cpu'].get('error', '')[:90]}"
    parts = []
    for m in modes:
        if report.compatible(result, m):
            parts.append(f"{m} [green]pass[/green]")
            continue
        if report.incomplete(result, m):
            parts.append(f"{m} [green]pass[/green], [yellow]not run[/yellow]: {', '.join(report.not_run_steps(result, m))}")
            continue
        bad = report.first_failed_step(result, m)
        cat = result["steps"].get(bad, {}).get("category", "not run")
        if m == "compiled" and report.fails_compiled_on_cpu_too(result):
            parts.append(f"{m} [yellow]fails on CPU too[/yellow] {bad} ({cat})")
        else:
            parts.append(f"{m} [red]FAIL[/red] {bad} ({cat})")
    return "  ".join(parts)


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from . import provenance, report, runner
    from .progress import matrix_progress
    from ..runtime.topology import TopologyError
    from .runner import WorkerStartError, run_matrix

    import signal
    import time
    signal.signal(signal.SIGTERM, _interrupt)
    console = Console()
    diffusers = args.suite == "diffusers"
    if args.pipeline and not diffusers or args.arch and diffusers:
        console.print("[red]error:[/red] --pipeline goes with --suite diffusers, --arch with the Transformers suite")
        return 2
    suite = runner.DIFFUSERS if diffusers else runner.TRANSFORMERS
    if args.worker:
        import dataclasses
        suite = dataclasses.replace(suite, worker=args.worker)
    known, not_runnable = _items(args.suite)
    noun = "pipelines" if diffusers else "architectures"
    if args.list:
        for name, what in known.items():
            console.print(f"{name:30s} {what}", highlight=False)
        for name, (category, reason) in not_runnable.items():
            console.print(f"{name:30s} [yellow]{category}[/yellow]: {escape(reason)}")
        return 0
    if args.combine:
        merged: dict[str, dict] = {}
        runs: list[dict] = []
        for d in args.combine:
            doc = report.load_doc(os.path.join(d, "compat.json"))
            merged = report.merge(merged, doc["results"])
            runs += [r for r in doc.get("runs", []) if r not in runs]
        _, mpath = report.write(merged, args.out, vars_for_json(args), runs)
        for m in report.modes_run(merged):
            console.print(escape(report.summarize(merged, m).line()))
        console.print(f"report: {mpath}")
        return 1 if _counted_failures(merged, report.modes_run(merged)) else 0
    archs = (args.pipeline if diffusers else args.arch) or list(known) + list(not_runnable)
    unknown = [a for a in archs if a not in known and a not in not_runnable]
    if unknown:
        where = "Diffusers' pipeline classes" if diffusers else "Transformers' causal-LM mapping"
        console.print(f"[red]error:[/red] not in {where}: {', '.join(unknown)} "
                      f"(see `torchneuron compat{' --suite diffusers' if diffusers else ''} --list`)")
        return 2
    # pipelines that are not built here get their row without a worker (the reason is the result)
    stamp = [provenance.row_stamp(provenance.source_state(suite.name), args.mode)]  # the registry's verdict, now
    skipped = {a: dict(_not_runnable_result(a, *not_runnable[a]), runs=stamp) for a in archs if a in not_runnable}
    archs = [a for a in archs if a in known]
    previous: dict[str, dict] = {}
    earlier_runs: list[dict] = []
    existing = os.path.join(args.out, "compat.json")
    if (args.resume or args.merge) and os.path.exists(existing):
        doc = report.load_doc(existing)
        previous, earlier_runs = doc["results"], doc.get("runs", [])
        if args.resume:  # a pipeline not built last time is run if it has a recipe now
            archs = [a for a in archs if a not in previous or report.not_built(previous[a])]
    modes = ["eager", "compiled"] if args.mode == "both" else [args.mode]

    previous = {**previous, **skipped}
    merged = dict(previous)
    this_run, t0, done = _run_entry(args, suite.name, diffusers), time.monotonic(), []
    runs = earlier_runs + [this_run]
    with matrix_progress(console, noun, len(archs)) as progress:

        def on_done(arch: str, result: dict) -> None:
            secs = result.get("seconds", {}).get("total", 0)
            progress.finished(arch, f"{arch:26s} {secs:6.1f}s  {_status_text(result, modes)}")
            merged.update(report.merge(merged, {arch: result}) if args.merge else {arch: result})
            done.append(arch)
            _finish_entry(this_run, t0, len(done))
            # a report on disk even if the run is cut short
            report.write(merged, args.out, vars_for_json(args), runs)

        try:
            results = run_matrix(archs, args.mode, args.jobs, args.timeout, on_start=progress.started,
                                 on_done=on_done, suite=suite)
        except (WorkerStartError, TopologyError) as e:  # a worker cannot start, or no free cores for --jobs
            progress.stop()
            console.print(f"[red]environment error:[/red] {escape(str(e))}", soft_wrap=True)
            return ENVIRONMENT_ERROR
    merged = report.merge(previous, results) if args.merge else {**previous, **results}
    _finish_entry(this_run, t0, len(results))
    jpath, mpath = report.write(merged, args.out, vars_for_json(args), runs)
    for m in report.modes_run(merged):
        console.print(escape(report.summarize(merged, m).line()))
    console.print(f"report: {mpath}  {jpath}")
    return 1 if _counted_failures(merged, modes) else 0


def _counted_failures(results: dict[str, dict], modes: list[str]) -> bool:
    """Does an item that passes on CPU fail on neuron (the exit code's 1)?"""
    from . import report
    return any(report.counted_failure(r, m) for r in results.values() for m in modes)


def _run_entry(args: argparse.Namespace, suite: str, diffusers: bool) -> dict:
    """This run of the command, for the report's header (finished and wall time kept current as rows finish)."""
    from . import provenance, report
    from .pipelines.report import DISTRIBUTIONS
    items = args.pipeline if diffusers else args.arch
    command = ["torchneuron compat"] + (["--suite diffusers"] if diffusers else []) + [f"--mode {args.mode}"]
    command += [f"--jobs {args.jobs}", f"--timeout {args.timeout:g}"]
    command += [flag for flag, on in (("--resume", args.resume), ("--merge", args.merge)) if on]
    command += [f"--worker {args.worker}"] if args.worker else []
    if items:
        command += [("--pipeline " if diffusers else "--arch ") + (" ".join(items) if len(items) <= 6 else
                                                                    f"... ({len(items)})")]
    state = provenance.source_state(suite)
    return {"suite": suite, "mode": args.mode, "command": " ".join(command), "commit": state["commit"],
            "dirty": state["dirty"], "started": provenance.now(), "finished": None, "wall_seconds": 0.0, "rows": 0,
            "versions": report.versions(DISTRIBUTIONS) if diffusers else report.versions()}


def _finish_entry(entry: dict, t0: float, rows: int) -> None:
    """The run so far: `rows` rows finished, `t0` (time.monotonic) its start."""
    import time
    from . import provenance
    entry.update(finished=provenance.now(), wall_seconds=round(time.monotonic() - t0, 1), rows=rows)


def _items(suite: str) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """(name -> what it is, for the items that run; name -> (category, reason) for those not run here)."""
    if suite == "diffusers":
        from .pipelines import registry
        return registry.runnable(), registry.not_runnable()
    from .architectures import causal_lm_architectures
    return causal_lm_architectures(), {}


def _not_runnable_result(name: str, category: str, reason: str) -> dict:
    from .pipelines import registry
    return {"arch": name, "suite": "diffusers", "family": registry.family(name), "mode": None, "built": False,
            "cpu": {"status": "fail", "category": category, "error": reason}, "steps": {}, "compile": {},
            "running": None, "seconds": {}}


def vars_for_json(args: argparse.Namespace) -> dict:
    return {k: v for k, v in vars(args).items() if k != "fn"}
