"""`torchneuron top`: a live view of the emulated NeuronCores of this host, like `neuron-top`.

Which process (PID, command line) holds which core, and each core's HBM in use and peak against its
budget. Every process using the plugin publishes those numbers itself: the core registry's lock file of
each core it holds carries its header (PID, core, LNC, budget) and two counters it keeps current through a
shared mapping (runtime/ownership.py). Reading them takes no lock a holder could notice, and a process that
exits (or is killed) drops its locks, so it leaves the view on the next refresh.

    torchneuron top                 refresh every second until Ctrl-C
    torchneuron top --once          one table
    torchneuron top --once --json   one JSON document, for scripts
"""

from __future__ import annotations

import argparse
import json
import time


def add_parser(sub) -> None:
    p = sub.add_parser("top", help="live view of the NeuronCores of this host: holders, HBM in use and peak",
                       description="Which process holds which emulated NeuronCore of this host, and its HBM in use "
                                   "and peak on each against the core's budget (like neuron-top).")
    p.add_argument("--once", action="store_true", help="print one view and exit")
    p.add_argument("--json", action="store_true", help="print one view as JSON and exit (implies --once)")
    p.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between refreshes (default 1)")
    p.add_argument("--instance", metavar="TYPE",
                   help="emulated instance type whose cores to show (default: TORCHNEURON_INSTANCE, else the host's default)")
    p.set_defaults(fn=main)


def snapshot(instance: str | None = None) -> dict:
    """The held cores of the emulated instance now, as `--json` prints them."""
    import os

    from .runtime import ownership
    from .runtime.topology import instance_name, instance_type
    name = instance or instance_name()
    inst = instance_type(name)
    held = ownership.held_cores(name)
    physical_total = inst.chips * inst.cores_per_chip
    physical_held = {p for h in held for p in h.physical_cores}
    return {
        "instance": name,
        "physical_cores": physical_total,
        "physical_cores_held": len(physical_held),
        "registry": ownership.registry_dir(),
        "cores": [{"core": h.core, "lnc": h.lnc, "physical_cores": list(h.physical_cores), "pid": h.pid,
                   "command": h.command, "hbm_in_use": h.hbm_in_use, "hbm_peak": h.hbm_peak,
                   "hbm_budget": h.hbm_budget} for h in held],
    }


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def render(view: dict):
    """A rich renderable of one view."""
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    title = Text.assemble(("torchneuron top", "bold"), f"  {view['instance']} (emulated)  ",
                          f"{view['physical_cores_held']} of {view['physical_cores']} physical NeuronCores held  ",
                          (time.strftime("%H:%M:%S"), "dim"))
    table = Table(show_header=True, header_style="bold", expand=False)
    for col, right in (("core", True), ("pid", True), ("command", False), ("HBM in use", True), ("peak", True),
                       ("budget", True), ("", False)):
        table.add_column(col, justify="right" if right else "left", no_wrap=True, overflow="ellipsis",
                         max_width=48 if col == "command" else None)
    for c in view["cores"]:
        budget = max(c["hbm_budget"], 1)
        bar = ProgressBar(total=budget, completed=c["hbm_in_use"], width=20)
        core = f"{c['core']}" + (f" (nc {c['physical_cores'][0]}-{c['physical_cores'][-1]})" if c["lnc"] > 1 else "")
        command = " ".join(c["command"].split()) or "(exited; a process it forked holds the core)"
        table.add_row(core, str(c["pid"]), command,
                      _size(c["hbm_in_use"]), _size(c["hbm_peak"]), _size(c["hbm_budget"]), bar)
    if not view["cores"]:
        table.add_row("-", "-", "no process holds a NeuronCore", "-", "-", "-", "")
    footer = Text(f"registry: {view['registry'] or 'off (TORCHNEURON_CORE_REGISTRY=off: holders are not recorded)'}",
                  style="dim")
    return Group(title, table, footer)


def main(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .runtime.topology import TopologyError
    console = Console()
    try:
        view = snapshot(args.instance)
    except TopologyError as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    if args.json:
        print(json.dumps(view, indent=2))
        return 0
    if args.once:
        console.print(render(view))
        return 0
    if args.interval <= 0:
        console.print(f"[red]error:[/red] --interval {args.interval}: give a positive number of seconds")
        return 2
    import signal

    from rich.live import Live
    # Ctrl-C (and SIGTERM) end the loop between redraws through a flag, not a KeyboardInterrupt: an
    # exception raised wherever the signal lands can be swallowed (in a finalizer the garbage collector
    # runs, Python prints "Exception ignored" and goes on), and top then never exits.
    stopping: list[int] = []

    def stop(signum, frame):
        stopping.append(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with Live(render(view), console=console, auto_refresh=False, screen=False) as live:
            while not stopping:
                time.sleep(args.interval)
                if not stopping:
                    live.update(render(snapshot(args.instance)), refresh=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
