"""The live progress line of a matrix run: bar, what is running, elapsed time and an estimate of what is left.

    ⠼ architectures ━━━━━━━╺━━━━━━━━━━  23/189  0:04:12  ~0:30:20 left  running: llama (0:12), mistral (0:03)

Each finished item prints one line above it. The estimate is the wall time per finished item so far
times the items left (so it already accounts for --jobs); rich's own estimate needs a steady rate of
small steps, which a matrix of minute-long items does not give.
"""

from __future__ import annotations

import contextlib
import threading
import time
from datetime import timedelta
from typing import Iterator


def _clock(seconds: float) -> str:
    return str(timedelta(seconds=int(seconds)))


def _minutes(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


class MatrixProgress:
    def __init__(self, progress, task, total: int):
        self._progress = progress
        self._task = task
        self._total = total
        self._start = time.monotonic()
        self._running: dict[str, float] = {}  # item -> its start time
        self._done = 0
        self._lock = threading.Lock()

    def started(self, item: str) -> None:
        with self._lock:
            self._running[item] = time.monotonic()

    def finished(self, item: str, line: str) -> None:
        with self._lock:
            self._running.pop(item, None)
            self._done += 1
        self._progress.console.print(line, highlight=False)
        self._progress.advance(self._task)

    def stop(self) -> None:
        self._progress.stop()

    def estimate_left(self) -> str:
        with self._lock:
            done = self._done
        if done == 0:
            return "estimating..."
        per_item = (time.monotonic() - self._start) / done
        return f"~{_clock(per_item * (self._total - done))} left"

    def running(self) -> str:
        now = time.monotonic()
        with self._lock:
            items = sorted(self._running.items(), key=lambda kv: kv[1])
        if not items:
            return ""
        return "running: " + ", ".join(f"{name} ({_minutes(now - t0)})" for name, t0 in items)


@contextlib.contextmanager
def matrix_progress(console, what: str, total: int) -> Iterator[MatrixProgress]:
    """A live progress display for `total` items of `what` (architectures, pipelines)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn, \
        TimeElapsedColumn
    from rich.text import Text

    state = MatrixProgress(None, None, total)

    class _Left(ProgressColumn):
        def render(self, task) -> Text:
            return Text(state.estimate_left() if task.remaining else "", style="progress.remaining")

    class _Running(ProgressColumn):
        def render(self, task) -> Text:
            return Text(state.running(), overflow="ellipsis", no_wrap=True)

    columns = (SpinnerColumn(), TextColumn(f"[bold]{what}"), BarColumn(bar_width=24), MofNCompleteColumn(),
               TimeElapsedColumn(), _Left(), _Running())
    with Progress(*columns, console=console, refresh_per_second=2) as progress:
        state._progress = progress
        state._task = progress.add_task(what, total=total)
        yield state
