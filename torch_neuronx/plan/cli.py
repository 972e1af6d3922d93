"""`torchneuron plan`: the command line over plan() and sweep(); a rich table in a terminal, --json for scripts.

Exit status: 0 the layout fits (--sweep: some layout fits); 1 bad input (the message names it and what works);
2 it does not fit (the message names the best layout that does, if any).
"""

from __future__ import annotations

import argparse
import sys

from .config import PlanError, presets

GIB = 1 << 30
FITS, DOES_NOT_FIT, BAD_INPUT = 0, 2, 1


def add_parser(sub) -> None:
    p = sub.add_parser("plan", help="will a training step fit each NeuronCore, with which TP x FSDP layout, how fast",
                       description="Plan a training step at full model size without the instance: the real step "
                                   "(Transformers model, DistributedConfig / FSDP2 sharding, loss, backward, "
                                   "optimizer) traced with fake tensors, the whole world simulated in this process.")
    p.add_argument("--model", required=True,
                   help=f"a config.json, a model directory, or a preset: {', '.join(presets())}")
    p.add_argument("--instance", default="trn2.48xlarge", help="instance type (default trn2.48xlarge)")
    p.add_argument("--nodes", type=int, default=1,
                   help="instances in the job (default 1); TP x FSDP spans all their cores")
    p.add_argument("--lnc", type=int, default=None, help="logical NeuronCore config (Trainium2/3: 1 or 2, default 2)")
    p.add_argument("--tp", type=int, default=1, help="tensor parallel degree (default 1)")
    p.add_argument("--fsdp", type=int, default=None, help="FSDP degree (default: the cores TP leaves)")
    p.add_argument("--seq", type=int, default=2048, help="sequence length (default 2048)")
    p.add_argument("--batch", type=int, default=1, help="micro-batch per FSDP rank (default 1)")
    p.add_argument("--global-batch", type=int, default=None,
                   help="sequences per optimizer step over the job (gradient accumulation; default batch x FSDP)")
    p.add_argument("--dtype", default="bf16", help="parameter dtype: bf16 (default) or fp32")
    p.add_argument("--optimizer", default="adamw", help="adamw (default) or sgd")
    p.add_argument("--activation-checkpointing", nargs="?", const="full", default="none",
                   choices=["none", "full", "selective"],
                   help="recompute in backward: full (each decoder layer; the default when given alone) or selective "
                        "(the attention kernel only)")
    p.add_argument("--attention", default="sdpa", choices=["sdpa", "eager"],
                   help="Transformers' attention implementation: sdpa (the fused flash kernel, default) or eager "
                        "(scores materialised)")
    p.add_argument("--full-trace", action="store_true",
                   help="trace every decoder layer (default: 2 and 3 of them, extrapolated: same result, faster)")
    p.add_argument("--sweep", action="store_true", help="plan every layout the instance and the model allow, ranked")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from . import planner

    console = Console(stderr=args.json)
    common = dict(instance=args.instance, seq=args.seq, batch=args.batch, dtype=args.dtype, optimizer=args.optimizer,
                  activation_checkpointing=args.activation_checkpointing, lnc=args.lnc, full_trace=args.full_trace,
                  nodes=args.nodes, global_batch=args.global_batch, attention=args.attention)
    try:
        if args.sweep:
            def progress(i, n, layout):
                if not args.json:
                    console.print(f"[dim]tracing {layout} ({i + 1}/{n})[/dim]")
            result = planner.sweep(args.model, progress=progress, **common)
            if args.json:
                print(result.to_json(indent=2))
            else:
                _print_sweep(console, result)
            return FITS if result.best else DOES_NOT_FIT
        p = planner.plan(args.model, tp=args.tp, fsdp=args.fsdp, **common)
        best = None
        if not p.fits:
            alternatives = planner.sweep(args.model, **common)
            best = alternatives.best
        if args.json:
            d = p.to_dict()
            if not p.fits:
                d["best_fitting_layout"] = best.to_dict() if best else None
            import json
            print(json.dumps(d, indent=2))
        else:
            _print_plan(console, p)
        if not p.fits:
            msg = (f"{p.layout} does not fit {p.instance}: each core needs {p.peak_per_core / GIB:.2f} GiB of "
                   f"{p.hbm_per_core / GIB:.0f} GiB. ")
            if best:
                msg += (f"Best layout that fits: {best.layout} (peak {best.peak_per_core / GIB:.2f} GiB, margin "
                        f"{best.margin_bytes / GIB:.2f} GiB, est. {best.estimate.step_seconds:.2f} s/step).")
            else:
                msg += ("No TP x FSDP layout of this instance fits: try --activation-checkpointing, a smaller "
                        "--batch or --seq, more --nodes or a larger instance.")
            print(f"error: {msg}", file=sys.stderr)
            return DOES_NOT_FIT
        return FITS
    except PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        return BAD_INPUT


def _gib(n: int) -> str:
    """Bytes in GiB, or MiB below 1 GiB (a small model's categories would all print 0.00 GiB)."""
    return f"{n / GIB:.2f} GiB" if abs(n) >= GIB else f"{n / (1 << 20):.2f} MiB"


def _job(p) -> str:
    return f"{p.nodes} x {p.instance}" if p.nodes > 1 else p.instance


def _checkpointing(p) -> str:
    return "" if p.activation_checkpointing == "none" else f", {p.activation_checkpointing} activation checkpointing"


def _band(e) -> str:
    if not e.band:
        return ""
    lo, hi = e.band
    return (f" (likely {e.tokens_per_second / hi:,.0f}-{e.tokens_per_second / lo:,.0f}: estimates were "
            f"{lo:.2f}-{hi:.2f}x AWS's measured figures)")


def _print_plan(console, p) -> None:
    from rich.table import Table

    from .estimate import BREAKDOWN

    console.print(f"[bold]{p.model}[/bold] ({p.source}, {p.parameters / 1e9:.2f} B parameters) on "
                  f"[bold]{_job(p)}[/bold] (LNC={p.lnc}, {p.cores * p.nodes} cores of {p.hbm_per_core / GIB:.0f} GiB)")
    console.print(f"{p.layout}, seq {p.seq}, micro-batch {p.batch} per FSDP rank, global batch {p.global_batch}, "
                  f"{p.dtype}, {p.optimizer}{_checkpointing(p)}")
    t = Table(title="peak HBM per core (rank 0, steady-state step)", show_header=True, header_style="bold")
    t.add_column("category")
    t.add_column("bytes", justify="right")
    t.add_column("of HBM", justify="right")
    for cat, n in p.by_category.items():
        t.add_row(cat.replace("_", " "), _gib(n), f"{100 * n / p.hbm_per_core:.1f}%")
    t.add_row("[bold]total[/bold]", f"[bold]{_gib(p.peak_per_core)}[/bold]",
              f"[bold]{100 * p.peak_per_core / p.hbm_per_core:.1f}%[/bold]")
    console.print(t)
    verdict = "[green]fits[/green]" if p.fits else "[red]does NOT fit[/red]"
    console.print(f"{verdict}: margin {_gib(p.margin_bytes)} of {p.hbm_per_core / GIB:.0f} GiB per core")
    e = p.estimate
    t = Table(title=f"estimated time of one micro-batch on a core ({e.accumulation} per step)", show_header=True,
              header_style="bold")
    t.add_column("part")
    t.add_column("ms", justify="right")
    for key, label in BREAKDOWN.items():
        t.add_row(label, f"{1e3 * e.breakdown[key]:,.1f}")
    t.add_row("[bold]micro-batch[/bold]", f"[bold]{1e3 * e.micro_batch_seconds:,.1f}[/bold]")
    t.add_row("optimizer step (once per step)", f"{1e3 * e.optimizer_seconds:,.1f}")
    console.print(t)
    if e.collectives:
        t = Table(title="collectives of one micro-batch, by the links they span", show_header=True,
                  header_style="bold")
        for col in ("collective", "group", "link", "runs", "count", "payload", "ms"):
            t.add_column(col, justify="left" if col in ("collective", "link", "runs") else "right")
        for c in e.collectives:
            t.add_row(c["kind"], str(c["group"]), c["link"], "overlapped" if c["overlapped"] else "blocking",
                      str(c["count"]), _gib(int(c["bytes"])), f"{1e3 * c['seconds']:,.1f}")
        console.print(t)
    console.print(f"[bold]estimate[/bold] (not a measurement): {e.step_seconds:.3f} s/step, "
                  f"{e.tokens_per_second:,.0f} tokens/s for the job{_band(e)}, "
                  f"{e.tokens_per_second_per_chip:,.0f} per chip, MFU {e.mfu:.0%} (HFU {e.hfu:.0%}); HBM traffic "
                  f"{e.hbm_bytes / GIB:.2f} GiB per micro-batch after fusion ({e.hbm_bytes_unfused / GIB:.2f} unfused)")
    if e.band:
        console.print(f"[dim]band: {e.band_source}[/dim]")
    console.print("[dim]assumptions:[/dim]")
    for a in e.assumptions:
        console.print(f"[dim]  - {a}[/dim]")
    for n in p.notes:
        console.print(f"[dim]note: {n}[/dim]")
    console.print(f"[dim]traced in {p.trace_seconds:.1f} s[/dim]")


def _print_sweep(console, s) -> None:
    from rich.table import Table

    if not s.plans:
        console.print("[red]no valid layout[/red]")
    else:
        p0 = s.plans[0]
        console.print(f"[bold]{p0.model}[/bold] on [bold]{_job(p0)}[/bold] (LNC={p0.lnc}, {p0.cores * p0.nodes} cores "
                      f"of {p0.hbm_per_core / GIB:.0f} GiB), seq {p0.seq}, micro-batch {p0.batch}, {p0.dtype}, "
                      f"{p0.optimizer}{_checkpointing(p0)}")
    t = Table(title="layouts, ranked (fits first, then estimated tokens/s)", show_header=True, header_style="bold")
    for col in ("#", "layout", "peak / core", "margin", "fits", "est. s/step", "est. tokens/s", "MFU"):
        t.add_column(col, justify="left" if col in ("layout", "fits") else "right")
    for i, p in enumerate(s.plans, 1):
        t.add_row(str(i), p.layout, _gib(p.peak_per_core), _gib(p.margin_bytes),
                  "[green]yes[/green]" if p.fits else "[red]no[/red]", f"{p.estimate.step_seconds:.3f}",
                  f"{p.estimate.tokens_per_second:,.0f}", f"{p.estimate.mfu:.0%}")
    console.print(t)
    for layout, why in s.skipped.items():
        console.print(f"[dim]not a candidate: {layout}: {why}[/dim]")
    if s.plans:
        e = s.plans[0].estimate
        if e.band:
            console.print(f"[dim]estimates were {e.band[0]:.2f}-{e.band[1]:.2f}x AWS's measured figures "
                          f"({e.band_source})[/dim]")
        console.print("[dim]step times are estimates: " + "; ".join(e.assumptions) + "[/dim]")
