"""`torchneuron`: the command line.

  torchneuron ls       NeuronCores of the emulated instance (like neuron-ls)
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
    console.print(f"[bold]instance[/bold] {inst.name} ({inst.chips} x {inst.chip}, NeuronCore-{inst.core_version}, "
                  f"LNC={topo.lnc}) - emulated: device memory is host RAM under a per-core HBM budget")
    table = Table(show_header=True, header_style="bold")
    for col in ("device", "core id", "chip", "HBM", "in use", "peak"):
        table.add_column(col, justify="right" if col in ("HBM", "in use", "peak") else "left")
    cores_per_chip = inst.cores(topo.lnc) // inst.chips
    for i, core in enumerate(topo.visible):
        s = runtime.memory_stats(i)
        table.add_row(f"neuron:{i}", str(core), str(core // cores_per_chip), f"{topo.hbm_per_core / gib:.0f} GiB",
                      f"{s['allocated_bytes'] / (1 << 20):.1f} MiB", f"{s['peak_allocated_bytes'] / (1 << 20):.1f} MiB")
    console.print(table)
    console.print(f"{topo.device_count} of {topo.total_cores} cores visible to this process "
                  f"(NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES); in use is this process's own allocations")
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
        table.add_row("runtime", f"emulator: {topo.instance.name}, {topo.device_count} cores, "
                                 f"{topo.hbm_per_core / runtime.GiB:.0f} GiB HBM per core")
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
    table.add_row("TORCHNEURON_FP64", os.environ.get("TORCHNEURON_FP64", "allow"))
    console.print(table)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="torchneuron", description="TorchNeuron: AWS Neuron as a PyTorch device")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("ls", help="list the NeuronCores of the emulated instance").set_defaults(fn=_ls)
    sub.add_parser("info", help="versions and plugin state").set_defaults(fn=_info)
    from .compat import cli as compat_cli
    compat_cli.add_parser(sub)
    from .plan import cli as plan_cli
    plan_cli.add_parser(sub)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
