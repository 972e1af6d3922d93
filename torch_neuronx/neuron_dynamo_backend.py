"""`torch_neuronx.neuron_dynamo_backend`: TorchNeuron's public names for its torch.compile backend.

The names a TorchNeuron program imports from this module, over this plugin's compile pipeline
(torch_neuronx/compile/): the backend itself, the model name in artifact file names, the rank,
the errors, the compile metrics, and the helpers that write a graph as text, MLIR or StableHLO
(built on the lowering stage, compile/lowering.py, so they show what the backend lowers).

    from torch_neuronx.neuron_dynamo_backend import set_model_name
    set_model_name("my_model")                     # artifacts: my_model_<timestamp>_<kind>.*
    compiled = torch.compile(model, backend="neuron")

Output types of the MLIR helpers are torch-mlir's (`torch_mlir.compiler_utils.OutputType`) or their
names: "raw" (the FX import, Torch dialect), "torch" (torch-mlir's backend contract), "stablehlo".
For "stablehlo" the graph is first presented as TorchNeuron presents it (lowering.py: None outputs
dropped, host kernels decomposed, float64 as float32); a graph that does not lower raises
NeuronLoweringError naming the op and the line that made it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .compile.artifacts import get_model_name, get_rank, set_model_name
from .compile.errors import NEFFCompilationError, NEFFExecutionError

__all__ = [
    "NEFFCompilationError", "NEFFExecutionError", "create_neuron_backend", "fx_to_mlir_string", "get_dynamo_metrics",
    "get_model_name", "get_rank", "load_mlir", "neuron_backend", "reset_dynamo_metrics", "save_fx_as_mlir",
    "save_fx_graph_all_formats", "save_fx_graph_txt", "save_mlir", "set_model_name",
]


def neuron_backend(gm: torch.fx.GraphModule, example_inputs: Any, *, options: dict | None = None,
                   mode: str | None = "default") -> Any:
    """The Dynamo backend `torch.compile(..., backend="neuron")` uses; only mode="default" (others warn)."""
    from .compile.backend import neuron_backend as backend
    return backend(gm, example_inputs, mode=mode, options=options)


def create_neuron_backend() -> Any:
    """A backend for torch.compile: `torch.compile(model, backend=create_neuron_backend())`."""
    return neuron_backend


def get_dynamo_metrics() -> dict:
    """Compile counts since start (or the last reset): graphs, NEFFs built, cache hits, recompiles, graph
    breaks, graphs lowered, seconds (torch_neuronx.compile_stats())."""
    from .compile import stats
    return stats.compile_stats()


def reset_dynamo_metrics() -> None:
    from .compile import stats
    stats.reset()


def _stage(output_type: Any) -> str:
    name = getattr(output_type, "value", output_type)
    name = str(name).lower().replace("_", "-")
    from .compile.lowering import STAGES
    if name not in STAGES:
        raise ValueError(f"output_type {output_type!r}: use one of {', '.join(STAGES)} (or torch-mlir's OutputType)")
    return name


def save_fx_graph_txt(gm: torch.fx.GraphModule, path: str | Path) -> Path:
    """Write the graph as readable text (.fx.txt)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(gm.print_readable(print_output=False))
    return path


def fx_to_mlir_string(gm: torch.fx.GraphModule, output_type: Any = "raw", verbose: bool = False,
                      enable_ir_printing: bool = False) -> str:
    """The graph as MLIR text at `output_type` ("raw", "torch" or "stablehlo"). `verbose` prints it;
    `enable_ir_printing` is accepted for TorchNeuron's signature (MLIR's per-pass dumps are not made)."""
    from .compile import lowering
    stage = _stage(output_type)
    graph = lowering.as_torchneuron_presents_it(lowering.prepare(gm)) if stage == "stablehlo" else gm
    try:
        text = lowering.to_mlir(graph, stage)
    except lowering._LoweringFailed as failure:
        raise lowering.lowering_error(graph, failure) from None
    if verbose:
        print(text)
    return text


def save_mlir(mlir_str: str, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(mlir_str)
    return path


def load_mlir(path: str | Path, context: Any = None) -> Any:
    """An MLIR file (Torch dialect or StableHLO) parsed into a torch-mlir `ir.Module`."""
    from torch_mlir import ir
    from torch_mlir._mlir_libs import _stablehlo
    from torch_mlir.dialects import torch as torch_dialect
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"MLIR file not found: {path}")
    if context is None:
        context = ir.Context()
        torch_dialect.register_dialect(context)
        _stablehlo.register_dialect(context)
    return ir.Module.parse(path.read_text(), context=context)


def save_fx_as_mlir(gm: torch.fx.GraphModule, path: str | Path, output_type: Any = "raw", verbose: bool = False,
                    enable_ir_printing: bool = False) -> Path:
    return save_mlir(fx_to_mlir_string(gm, output_type, verbose, enable_ir_printing), path)


def save_fx_graph_all_formats(gm: torch.fx.GraphModule, base_path: str | Path, save_txt: bool = True,
                              save_raw_mlir: bool = True, save_stablehlo_mlir: bool = False) -> dict[str, Path]:
    """`base_path` with .fx.txt, .raw.mlir and (if asked) .stablehlo.mlir: {"txt"|"raw_mlir"|"stablehlo_mlir": path}."""
    base_path = Path(base_path)
    saved = {}
    if save_txt:
        saved["txt"] = save_fx_graph_txt(gm, base_path.with_suffix(".fx.txt"))
    if save_raw_mlir:
        saved["raw_mlir"] = save_fx_as_mlir(gm, base_path.with_suffix(".raw.mlir"), "raw")
    if save_stablehlo_mlir:
        saved["stablehlo_mlir"] = save_fx_as_mlir(gm, base_path.with_suffix(".stablehlo.mlir"), "stablehlo")
    return saved

