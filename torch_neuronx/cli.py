"""`torchneuron`: the command line.

  torchneuron ls       NeuronCores of the emulated instance (like neuron-ls)
  torchneuron top      live view of the cores of this host: holders, HBM in use and peak (like neuron-top)
  torchneuron info     versions and plugin state
  torchneuron compat   compatibility matrix of Transformers causal-LM architectures
  torchneuron plan     will a training step fit each NeuronCore, with which layout, how fast (docs/plan.md)
"""

from __future__ import annotations

import argparse
import sys


def _ls(args: argparse.Namespace) -> int:
    import torch
    from rich.console import Console
    from rich.table import Table

    from . import runtime

    console = Console()
    try:
        topo = runtime.topology()
    except runtime.TopologyError as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    inst = topo.instance
    gib = runtime.GiB
    reserve = runtime.RUNTIME_RESERVE_PER_PHYSICAL_CORE
    console.print(f"[bold]instance[/bold] {inst.name} ({inst.chips} x {inst.chip}, NeuronCore-{inst.core_version}, "
                  f"LNC={topo.lnc}) - emulated: device memory is host RAM under each HBM bank's budget")
    if not inst.supported_by_torchneuron:
        console.print(f"[yellow]note:[/yellow] the real TorchNeuron runs on Trn2 and Trn3 only; {inst.chip} is "
                      f"emulated for older jobs")
    bank = (f"two cores share each {inst.bank_bytes() / gib:.0f} GiB bank" if topo.shared_bank
            else f"each core has its own {inst.bank_bytes() / gib:.0f} GiB bank")
    console.print(f"HBM: {bank}; the runtime keeps {reserve >> 20} MiB per physical core, leaving "
                  f"{topo.hbm_per_core / gib:.2f} GiB per bank for tensors")
    from .runtime import ownership
    holders = {}
    for h in ownership.held_cores(inst.name):
        for p in h.physical_cores:
            holders[p] = h
    table = Table(show_header=True, header_style="bold")
    for col in ("device", "core id", "chip", "HBM", "held by", "holder's use"):
        table.add_column(col, justify="right" if col in ("HBM", "holder's use") else "left")
    cores_per_chip = inst.cores(topo.lnc) // inst.chips
    for i in range(topo.first_index, topo.first_index + len(topo.visible)):
        core = topo.core_of(i)
        held = {holders[p] for p in ownership.physical_cores(core, topo.lnc) if p in holders}
        who = ", ".join(f"pid {h.pid} {h.command[:40]}".strip() for h in sorted(held, key=lambda h: h.pid)) or "free"
        use = ", ".join(f"{h.hbm_in_use / (1 << 20):.1f} MiB" for h in sorted(held, key=lambda h: h.pid)) or "-"
        table.add_row(f"neuron:{i}", str(core), str(core // cores_per_chip), f"{topo.hbm_per_core / gib:.2f} GiB",
                      who, use)
    console.print(table)
    registry = ownership.registry_dir()
    console.print(f"{len(topo.visible)} of {topo.total_cores} cores visible to this process "
                  f"(NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES); a core is held by the process that first "
                  f"used it until it exits (registry: {registry or 'off'})")
    return 0


def _info(args: argparse.Namespace) -> int:
    import importlib.metadata as md
    import os
    import platform

    import torch
    from rich.console import Console
    from rich.table import Table

    import torch_neuronx
    from . import runtime

    console = Console()
    table = Table(show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")

    def version(dist: str) -> str:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return "not installed"

    table.add_row("torch-neuronx", version("torch-neuronx"))
    for dist in ("torch", "transformers", "trl", "peft", "accelerate", "diffusers"):
        table.add_row(dist, version(dist))
    table.add_row("torch-xla", version("torch-xla") + ("  [red](remove it: it switches HF to the legacy XLA path)[/red]"
                                                        if version("torch-xla") != "not installed" else ""))
    table.add_row("python", platform.python_version())
    table.add_row("device type", torch._C._get_privateuse1_backend_name())
    table.add_row("torch.neuron available", str(torch.neuron.is_available()))
    try:
        topo = runtime.topology()
        table.add_row("runtime", f"emulator: {topo.instance.name}, {len(topo.visible)} cores, "
                                 f"{topo.hbm_per_core / runtime.GiB:.2f} GiB HBM per core")
    except runtime.TopologyError as e:
        table.add_row("runtime", f"[red]unavailable: {e}[/red]")
    autoload = os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") != "0"
    table.add_row("autoload on `import torch`", str(autoload))
    try:
        import torch._dynamo
        table.add_row("torch.compile backend 'neuron'", str("neuron" in torch._dynamo.list_backends()))
    except Exception as e:  # noqa: BLE001 - info must print whatever state the install is in
        table.add_row("torch.compile backend 'neuron'", f"error: {e}")
    import torch.distributed as dist
    table.add_row("c10d backend 'neuron'", str(dist.is_available() and "neuron" in dist.Backend.backend_list))
    table.add_row("HF_DEACTIVATE_ASYNC_LOAD", os.environ.get("HF_DEACTIVATE_ASYNC_LOAD", ""))
    from . import dtypes
    table.add_row("TORCHNEURON_INT64", os.environ.get("TORCHNEURON_INT64", dtypes.DEFAULT_INT64))
    table.add_row("TORCHNEURON_FP64", os.environ.get("TORCHNEURON_FP64", dtypes.DEFAULT_FP64))
    table.add_row("NEURON_RT_STOCHASTIC_ROUNDING_EN", os.environ.get("NEURON_RT_STOCHASTIC_ROUNDING_EN", "0"))
    table.add_row("TORCHNEURON_CPU_FALLBACK", os.environ.get("TORCHNEURON_CPU_FALLBACK", "allow"))
    console.print(table)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="torchneuron", description="TorchNeuron: AWS Neuron as a PyTorch device")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("ls", help="list the NeuronCores of the emulated instance").set_defaults(fn=_ls)
    sub.add_parser("info", help="versions and plugin state").set_defaults(fn=_info)
    from . import top
    top.add_parser(sub)
    from .compat import cli as compat_cli
    compat_cli.add_parser(sub)
    from .plan import cli as plan_cli
    plan_cli.add_parser(sub)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
