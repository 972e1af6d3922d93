"""`torchneuron compat`: the command that runs the matrix and writes the report."""

from __future__ import annotations

import argparse
import os

from .runner import DEFAULT_TIMEOUT

ENVIRONMENT_ERROR = 3  # exit code: no worker could start (1: failures on neuron, 2: bad arguments)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compat", help="compatibility matrix of Transformers causal-LM architectures",
        description="Build a tiny random model of every causal-LM architecture in Transformers, run forward, "
                    "backward and greedy generate() on CPU and on neuron (eager and torch.compile), and write "
                    "OUT/compat.json and OUT/compat.md. Exit code 1 if an item that passes on CPU fails on neuron, 3 if the "
                    "workers cannot start in this environment.")
    p.add_argument("--arch", nargs="+", metavar="NAME",
                   help="model_type(s) (default: all of them)")
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
    from . import report, runner
    from .progress import matrix_progress
    from .runner import WorkerStartError, run_matrix
    from .architectures import causal_lm_architectures

    import signal
    signal.signal(signal.SIGTERM, _interrupt)
    console = Console()
    suite = runner.TRANSFORMERS
    if args.worker:
        import dataclasses
        suite = dataclasses.replace(suite, worker=args.worker)
    known = causal_lm_architectures()
    noun = "architectures"
    if args.list:
        for name, what in known.items():
            console.print(f"{name:30s} {what}", highlight=False)
        return 0
    if args.combine:
        merged: dict[str, dict] = {}
        for d in args.combine:
            merged = report.merge(merged, report.load(os.path.join(d, "compat.json")))
        _, mpath = report.write(merged, args.out, vars_for_json(args))
        for m in report.modes_run(merged):
            console.print(escape(report.summarize(merged, m).line()))
        console.print(f"report: {mpath}")
        return 0
    archs = args.arch or list(known)
    unknown = [a for a in archs if a not in known]
    if unknown:
        console.print(f"[red]error:[/red] not in Transformers' causal-LM mapping: {', '.join(unknown)} "
                      f"(see `torchneuron compat --list`)")
        return 2
    previous: dict[str, dict] = {}
    existing = os.path.join(args.out, "compat.json")
    if (args.resume or args.merge) and os.path.exists(existing):
        previous = report.load(existing)
        if args.resume:
            archs = [a for a in archs if a not in previous]
    modes = ["eager", "compiled"] if args.mode == "both" else [args.mode]

    merged = dict(previous)
    with matrix_progress(console, noun, len(archs)) as progress:

        def on_done(arch: str, result: dict) -> None:
            secs = result.get("seconds", {}).get("total", 0)
            progress.finished(arch, f"{arch:26s} {secs:6.1f}s  {_status_text(result, modes)}")
            merged.update(report.merge(merged, {arch: result}) if args.merge else {arch: result})
            report.write(merged, args.out, vars_for_json(args))  # a report on disk even if the run is cut short

        try:
            results = run_matrix(archs, args.mode, args.jobs, args.timeout, on_start=progress.started,
                                 on_done=on_done, suite=suite)
        except WorkerStartError as e:
            progress.stop()
            console.print(f"[red]environment error:[/red] {escape(str(e))}", soft_wrap=True)
            return ENVIRONMENT_ERROR
    merged = report.merge(previous, results) if args.merge else {**previous, **results}
    jpath, mpath = report.write(merged, args.out, vars_for_json(args))
    for m in report.modes_run(merged):
        console.print(escape(report.summarize(merged, m).line()))
    console.print(f"report: {mpath}  {jpath}")
    ok = not any(report.counted_failure(r, m) for r in merged.values() for m in modes)
    return 0 if ok else 1


def vars_for_json(args: argparse.Namespace) -> dict:
    return {k: v for k, v in vars(args).items() if k != "fn"}
