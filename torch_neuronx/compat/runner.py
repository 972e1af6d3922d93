"""Run the worker for many architectures: one subprocess each, a timeout each, N at a time.

A process per architecture means a segfault, an abort or a hang in one model
costs that model's row only. The worker rewrites its result file after every
step, so a process that is killed at its timeout (or dies) still reports what
passed, and the step it was in is the one marked timeout / crash.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from . import categories
from .worker import COMPILED_STEPS, EAGER_STEPS, STEPS

DEFAULT_TIMEOUT = 600  # seconds per architecture (both modes, on a busy 2-core machine)


def _worker_env() -> dict:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")  # tiny models come from configs: nothing to download
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    # one thread per worker: --jobs N then uses N cores, and host kernels reduce
    # in the same order on both sides
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    return env


def _mark_unfinished(result: dict, category: str, message: str, mode: str) -> None:
    """Steps the worker never finished: the one it was in gets `category`, later ones are not run."""
    steps = {"eager": EAGER_STEPS, "compiled": COMPILED_STEPS, "both": STEPS}[mode]
    running = result.get("running")
    if running == "cpu" or result.get("cpu", {}).get("status") == "running":
        # died before the reference existed: the neuron side was never reached
        result["cpu"] = {"status": "fail", "category": category, "error": message + " (on CPU, building the reference)"}
        result["running"] = None
        return
    for name in steps:
        if name in result["steps"]:
            continue
        if name == running or running is None:
            result["steps"][name] = {"status": "fail", "category": category, "error": message}
            running = "done"  # the steps after it did not run
        else:
            result["steps"][name] = {"status": "not run", "error": f"not run: an earlier step ended with {category}"}
    result["running"] = None


_live: set = set()  # worker processes running now (ended if the run is interrupted)


def run_one(arch: str, mode: str, timeout: float, workdir: str, live: set | None = None) -> dict:
    """Run one architecture's worker; always returns a result dict (never raises for the model's failures)."""
    out = os.path.join(workdir, f"{arch}.json")
    log = os.path.join(workdir, f"{arch}.log")
    cmd = [sys.executable, "-m", "torch_neuronx.compat.worker", arch, "--mode", mode, "--out", out]
    t0 = time.monotonic()
    with open(log, "w") as logf:
        # own process group: the timeout kills the worker and anything it started
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=_worker_env(),
                                start_new_session=True)
        if live is not None:
            live.add(proc)
        try:
            code = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code, timed_out = proc.returncode, True
        finally:
            if live is not None:
                live.discard(proc)
    elapsed = round(time.monotonic() - t0, 1)
    try:
        with open(out) as f:
            result = json.load(f)
    except (OSError, ValueError):
        result = {"arch": arch, "mode": mode, "cpu": {"status": "running"}, "steps": {}, "compile": {},
                  "running": "cpu", "seconds": {}}
    if timed_out:
        _mark_unfinished(result, categories.TIMEOUT, f"timeout: no result after {timeout:.0f} s", mode)
    elif result.get("running") is not None or code != 0:
        tail = _log_tail(log)
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        _mark_unfinished(result, categories.CRASH, f"worker died ({how}){': ' + tail if tail else ''}", mode)
    result["seconds"] = dict(result.get("seconds") or {}, total=elapsed)
    return result


def _log_tail(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            lines = [ln.strip() for ln in f.read().splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def run_matrix(archs: list[str], mode: str = "both", jobs: int = 1, timeout: float = DEFAULT_TIMEOUT,
               on_start: Callable[[str], None] | None = None,
               on_done: Callable[[str, dict], None] | None = None, workdir: str | None = None) -> dict[str, dict]:
    """Results for `archs` (arch -> result), `jobs` workers at a time."""
    own_dir = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="torchneuron-compat-")
    results: dict[str, dict] = {}
    lock = threading.Lock()
    stopping = threading.Event()

    def one(arch: str) -> None:
        if stopping.is_set():
            return
        if on_start:
            on_start(arch)
        r = run_one(arch, mode, timeout, workdir, _live)
        if stopping.is_set():
            return  # killed by the interruption, not by its model: no verdict
        with lock:
            results[arch] = r
        if on_done:
            on_done(arch, r)

    try:
        _run_pool(one, archs, jobs, stopping)
    finally:
        if own_dir:
            import shutil
            shutil.rmtree(workdir, ignore_errors=True)
    return {a: results[a] for a in archs if a in results}


def _run_pool(one: Callable[[str], None], archs: list[str], jobs: int, stopping: threading.Event) -> None:
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        try:
            list(pool.map(one, archs))
        except BaseException:
            # interrupted (Ctrl-C, SIGTERM): end the workers, which run in their own sessions
            stopping.set()
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in list(_live):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            raise
