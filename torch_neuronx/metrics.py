"""`torch_neuronx.metrics`: TorchNeuron's counters and metrics, for what they count here.

Counters (integers) and metrics (an accumulated quantity and its number of samples) with names as
TorchNeuron's ("Category.Name"):

  CompilationCache.TotalCompilations   compiled units (torch.compile graphs) built from scratch
  CompilationCache.PersistentHits      compiled units loaded from the persistent compile cache instead
  CompilationCache.PersistentMisses    compiled units the persistent cache did not have (or it is off)
  CompilationCache.CompilationTime     metric: seconds spent compiling, one sample per built unit
  Eager.OpCalls                        eager op calls a NeuronCore or the CPU fallback would run
  Eager.NeuronOpCalls / Eager.FallbackOpCalls   the same, split by where Trainium runs them
                                       (get_executed_ops() / get_fallback_ops())
  Eager.OpSignatures                   distinct eager op signatures: how many eager kernels Trainium compiles

TorchNeuron's in-memory cache counters and NEFF sizes describe its per-op NEFF cache, which the emulator does
not have (its eager ops run host kernels): absent. Collection follows TORCH_NEURONX_METRICS_ENABLED (1, true or
yes; default off) and set_enabled(): values count only while enabled.

CSV tables: TORCH_NEURONX_ENABLED_METRIC_TABLES (comma-separated names) are written at exit to
TORCH_NEURONX_METRICS_DIR (default /tmp) as metric_table_<name>_rank<rank>.csv. Tables: "op_stats" (per op:
calls, distinct signatures, where Trainium runs it); register_metric_table() adds one (the compile backend's
per-graph "graph_stats", docs/compile.md).
"""

from __future__ import annotations

import atexit
import csv
import logging
import os
import threading
from typing import Any, Callable, Iterable

from . import _C

log = logging.getLogger("torch_neuronx.metrics")
_lock = threading.Lock()


def _env_enabled() -> bool:
    return os.environ.get("TORCH_NEURONX_METRICS_ENABLED", "0").strip().lower() in ("1", "true", "yes")


def _sources() -> tuple[dict[str, int], dict[str, tuple[float, int]]]:
    """The always-kept counts this module reports: (counters, metrics as (accumulator, samples))."""
    from .compile import stats
    from .registered_ops import REGISTERED_OPS
    compile_stats = stats.compile_stats()
    calls = dict(_C._op_calls())
    neuron_calls = sum(n for op, n in calls.items() if op.split(".", 1)[0] in REGISTERED_OPS)
    counters = {
        "CompilationCache.TotalCompilations": compile_stats["neffs_built"],
        "CompilationCache.PersistentHits": compile_stats["cache_hits"],
        "CompilationCache.PersistentMisses": compile_stats["neffs_built"],
        "Eager.OpCalls": sum(calls.values()),
        "Eager.NeuronOpCalls": neuron_calls,
        "Eager.FallbackOpCalls": sum(calls.values()) - neuron_calls,
        "Eager.OpSignatures": sum(n for _, n in _C._op_signature_counts()),
    }
    metrics = {"CompilationCache.CompilationTime": (float(compile_stats["compile_seconds"]),
                                                    int(compile_stats["neffs_built"]))}
    return counters, metrics


_NOTHING_YET: dict[str, Any] = {}  # disabled since the start: every value is 0 (the sources are not read)


class _Window:
    """Values counted since the last clear, only while enabled: the sources minus a base."""

    def __init__(self) -> None:
        self.base: dict[str, Any] = {}
        self.frozen: dict[str, Any] | None = None  # while disabled: the values when it was disabled

    @staticmethod
    def _minus(value: Any, base: Any) -> Any:
        if isinstance(value, tuple):
            base = base or (0.0, 0)
            if value[1] < base[1]:  # the source was reset (clear_op_tracking, reset_dynamo_metrics)
                return value
            return (value[0] - base[0], value[1] - base[1])
        base = base or 0
        return value if value < base else value - base

    @staticmethod
    def _zeros(raw: dict[str, Any]) -> dict[str, Any]:
        return {k: ((0.0, 0) if isinstance(v, tuple) else 0) for k, v in raw.items()}

    def values(self, raw: dict[str, Any]) -> dict[str, Any]:
        if self.frozen is _NOTHING_YET:
            return self._zeros(raw)
        if self.frozen is not None:
            return dict(self.frozen)
        return {k: self._minus(v, self.base.get(k)) for k, v in raw.items()}

    def clear(self, raw: dict[str, Any]) -> None:
        self.base = dict(raw)
        if self.frozen is not None:
            self.frozen = self._zeros(raw)

    def disable(self, raw: dict[str, Any]) -> None:
        if self.frozen is None:
            self.frozen = self.values(raw)

    def enable(self, raw: dict[str, Any]) -> None:
        if self.frozen is None:
            return
        frozen, self.frozen = self.frozen, None
        if frozen is _NOTHING_YET:
            frozen = {}
        self.base = {}
        for k, v in raw.items():
            f = frozen.get(k)
            if isinstance(v, tuple):
                f = f or (0.0, 0)
                self.base[k] = (v[0] - f[0], v[1] - f[1])
            else:
                self.base[k] = v - (f or 0)


_counters, _metrics = _Window(), _Window()


def _values() -> tuple[dict[str, int], dict[str, tuple[float, int]]]:
    raw_counters, raw_metrics = _sources()
    return _counters.values(raw_counters), _metrics.values(raw_metrics)


def is_enabled() -> bool:
    """Whether counters and metrics are being collected."""
    with _lock:
        return _counters.frozen is None


def set_enabled(enabled: bool) -> None:
    """Start or stop collecting (values are kept while stopped)."""
    with _lock:
        raw_counters, raw_metrics = _sources()
        for window, raw in ((_counters, raw_counters), (_metrics, raw_metrics)):
            (window.enable if enabled else window.disable)(raw)


def get_counter_names() -> list[str]:
    """Counters that have counted something."""
    with _lock:
        counters, _ = _values()
    return sorted(k for k, v in counters.items() if v)


def get_counter_value(name: str) -> int | None:
    """A counter's value; None for an unknown counter."""
    with _lock:
        counters, _ = _values()
    return counters.get(name)


def get_metric_names() -> list[str]:
    """Metrics that have samples."""
    with _lock:
        _, metrics = _values()
    return sorted(k for k, (_, n) in metrics.items() if n)


def _format_seconds(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}ms" if seconds < 1 else f"{seconds:.3f}s"


def get_metric_data(name: str) -> dict[str, Any] | None:
    """{"accumulator", "total_samples", "repr"} of a metric with samples; None otherwise."""
    with _lock:
        _, metrics = _values()
    if name not in metrics or not metrics[name][1]:
        return None
    accumulator, samples = metrics[name]
    return {"accumulator": accumulator, "total_samples": samples, "repr": _format_seconds(accumulator)}


def _report(counters: Iterable[str], metrics: Iterable[str]) -> str:
    lines = []
    for name in metrics:
        data = get_metric_data(name)
        if data:
            lines += [f"Metric: {name}", f"  TotalSamples: {data['total_samples']}",
                      f"  Accumulator: {data['repr']}"]
    for name in counters:
        value = get_counter_value(name)
        if value:
            lines += [f"Counter: {name}", f"  Value: {value}"]
    return "\n".join(lines) + ("\n" if lines else "")


def report() -> str:
    """Every metric and counter with data, one block each."""
    return _report(get_counter_names(), get_metric_names())


def report_filtered(counter_names: list[str] | None = None, metric_names: list[str] | None = None) -> str:
    """The report restricted to these counters and metrics."""
    return _report(counter_names or [], metric_names or [])


def clear_counters() -> None:
    with _lock:
        _counters.clear(_sources()[0])


def clear_metrics() -> None:
    with _lock:
        _metrics.clear(_sources()[1])


def clear_all() -> None:
    clear_counters()
    clear_metrics()


def get_compilation_metrics() -> dict[str, Any]:
    """The compilation counters and metrics: {name: value} and {name: {accumulator, total_samples, formatted}}."""
    out: dict[str, Any] = {n: get_counter_value(n) for n in get_counter_names() if "Compilation" in n}
    for name in get_metric_names():
        if "Compilation" in name:
            data = get_metric_data(name)
            out[name] = {"accumulator": data["accumulator"], "total_samples": data["total_samples"],
                         "formatted": data["repr"]}
    return out


# --- CSV tables --------------------------------------------------------------------------------------------

_tables: dict[str, tuple[list[str], Callable[[], Iterable[list[Any]]]]] = {}


def register_metric_table(name: str, columns: list[str], rows: Callable[[], Iterable[list[Any]]]) -> None:
    """A table TORCH_NEURONX_ENABLED_METRIC_TABLES can name: its columns and a function giving its rows."""
    _tables[name] = (list(columns), rows)


def _op_stats_rows() -> Iterable[list[Any]]:
    from .registered_ops import REGISTERED_OPS
    signatures = dict(_C._op_signature_counts())
    for op, calls in sorted(_C._op_calls(), key=lambda kv: (-kv[1], kv[0])):
        yield [op, calls, signatures.get(op, 0), "neuron" if op.split(".", 1)[0] in REGISTERED_OPS else "cpu"]


register_metric_table("op_stats", ["op", "calls", "signatures", "runs_on"], _op_stats_rows)


def _rank() -> int:
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0"))


def write_metric_tables() -> list[str]:
    """Write the tables TORCH_NEURONX_ENABLED_METRIC_TABLES names (at exit, or now); returns the files."""
    names = [n.strip() for n in os.environ.get("TORCH_NEURONX_ENABLED_METRIC_TABLES", "").split(",") if n.strip()]
    unknown = [n for n in names if n not in _tables]
    if unknown:
        log.warning("TORCH_NEURONX_ENABLED_METRIC_TABLES names unknown tables %s; available: %s",
                    ", ".join(unknown), ", ".join(sorted(_tables)))
    directory = os.environ.get("TORCH_NEURONX_METRICS_DIR", "/tmp")
    written = []
    for name in names:
        if name not in _tables:
            continue
        columns, rows = _tables[name]
        path = os.path.join(directory, f"metric_table_{name}_rank{_rank()}.csv")
        try:
            os.makedirs(directory, exist_ok=True)
            with open(path, "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(columns)
                writer.writerows(rows())
        except OSError as e:
            log.warning("cannot write metric table %s to %s: %s", name, path, e)
            continue
        written.append(path)
        log.info("wrote metric table %s to %s", name, path)
    return written


if not _env_enabled():
    _counters.frozen = _metrics.frozen = _NOTHING_YET
atexit.register(write_metric_tables)
