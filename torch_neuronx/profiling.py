"""`torch_neuronx.profiling`: TorchNeuron's NeuronProfiler, over PyTorch's profiler.

On Trainium NeuronProfiler runs two profilers together: the Neuron runtime's (NRT) system and device
profile, written to `neuron_output_dir` for Neuron Explorer, and torch.profiler, whose Chrome trace it writes
to `neuron_output_dir/pytorch_trace.json` (or `neuron_output_dir/<pytorch_trace_file>`). The emulator has no
Neuron runtime and no NeuronCore to trace: the NRT profile does not exist here. What does exist is
torch.profiler with the neuron activity (ProfilerActivity.PrivateUse1: this plugin's Kineto profiler, each
neuron kernel with its device time, csrc/core/Profiler.cpp), so NeuronProfiler writes that trace, to the same
place, and raises NRTProfilerError when only the NRT profile was asked for (no pytorch_activities).
`event_filters` select NRT events ('nc': NeuronCore ids or ranges, 'types': event types): they are checked
and otherwise have nothing to filter.
"""

from __future__ import annotations

import os
from typing import Any

from torch.profiler import ProfilerActivity, profile

__all__ = ["NeuronProfiler", "NRTProfilerError"]


class NRTProfilerError(Exception):
    """The Neuron runtime's profiler cannot do what was asked (here: it does not exist)."""


def _check_event_filters(event_filters: dict[str, Any]) -> None:
    unknown = set(event_filters) - {"nc", "types"}
    if unknown:
        raise ValueError(f"event_filters: unknown keys {sorted(unknown)}; use 'nc' (NeuronCore ids or ranges "
                         "such as '4-7') and 'types' (NRT event types)")
    for spec in event_filters.get("nc", []):
        text = str(spec).strip()
        parts = text.split("-")
        if not all(p.strip().isdigit() for p in parts) or len(parts) > 2 or (
                len(parts) == 2 and int(parts[0]) > int(parts[1])):
            raise ValueError(f"event_filters['nc']: {spec!r} is not a NeuronCore id or range such as '4-7'")


class NeuronProfiler:
    """Context manager that profiles a region: torch.profiler's trace, written to `neuron_output_dir`.

    pytorch_activities: torch.profiler activities, e.g. [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
        (PrivateUse1: the neuron kernels with their device time). Required here: without them TorchNeuron
        records only the NRT profile, which the emulator does not have (NRTProfilerError).
    record_shapes: record input shapes (torch.profiler's option).
    pytorch_trace_file: the trace's file name inside neuron_output_dir (default pytorch_trace.json).
    neuron_output_dir: where the trace goes (default ./output, created if needed).
    event_filters: NRT event filters, checked (see the module docstring).
    """

    def __init__(self, pytorch_activities: list[ProfilerActivity] | None = None, record_shapes: bool = False,
                 pytorch_trace_file: str | None = None, neuron_output_dir: str = "./output",
                 event_filters: dict[str, list[str] | list[int]] | None = None):
        self.pytorch_activities = list(pytorch_activities or [])
        self.record_shapes = record_shapes
        self.neuron_output_dir = neuron_output_dir
        self.pytorch_trace_file = (os.path.join(neuron_output_dir, pytorch_trace_file or "pytorch_trace.json")
                                   if self.pytorch_activities else None)
        if event_filters:
            _check_event_filters(event_filters)
        self.event_filters = event_filters
        self._profiler: profile | None = None
        self._active = False

    def start(self) -> None:
        if self._active:
            raise RuntimeError("Profiler is already active")
        if not self.pytorch_activities:
            raise NRTProfilerError(
                "NeuronProfiler without pytorch_activities records only the Neuron runtime's (NRT) device profile, "
                "which needs Trainium: the emulator has no Neuron runtime. Its device activity is in torch.profiler's "
                "trace: pass pytorch_activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1] "
                f"(written to {self.neuron_output_dir}/pytorch_trace.json).")
        self._profiler = profile(activities=self.pytorch_activities, record_shapes=self.record_shapes)
        self._profiler.__enter__()
        self._active = True

    def stop(self) -> None:
        if not self._active:
            raise RuntimeError("Profiler is not active")
        self._active = False
        self._profiler.__exit__(None, None, None)
        os.makedirs(self.neuron_output_dir, exist_ok=True)
        self._profiler.export_chrome_trace(self.pytorch_trace_file)

    def __enter__(self) -> "NeuronProfiler":
        self.start()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb) -> bool:
        self.stop()
        return False

    def is_active(self) -> bool:
        return self._active

    def has_pytorch_profiling(self) -> bool:
        return bool(self.pytorch_activities)

    def get_pytorch_trace(self) -> str | None:
        """The profiler's summary table once stopped (str of torch.profiler's profile), else None."""
        if self._profiler is not None and not self._active:
            return str(self._profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=50))
        return None

    def get_nrt_output_directory(self) -> str:
        return self.neuron_output_dir

    def export_pytorch_trace(self, filename: str) -> None:
        """Write the Chrome trace to another file as well."""
        if self._profiler is None:
            raise ValueError("PyTorch profiling not enabled or not started")
        if self._active:
            raise ValueError("Cannot export trace while profiling is active")
        self._profiler.export_chrome_trace(filename)
