"""Run the worker for many architectures: one subprocess each, a timeout each, N at a time.

A process per architecture means a segfault, an abort or a hang in one model
costs that model's row only. The worker rewrites its result file after every
step, so a process that is killed at its timeout (or dies) still reports what
passed, and the step it was in is the one marked timeout / crash.
"""

from __future__ import annotations

import dataclasses
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

from . import categories, provenance
from .worker import COMPILED_STEPS, EAGER_STEPS, STEPS

DEFAULT_TIMEOUT = 600  # seconds per architecture (both modes, on a busy 2-core machine)


@dataclasses.dataclass(frozen=True)
class Suite:
    """What the matrix runs: the worker module (run with `python -m`) and the steps of each mode."""
    name: str
    worker: str
    steps: dict[str, tuple[str, ...]]


TRANSFORMERS = Suite("transformers", "torch_neuronx.compat.worker",
                     {"eager": EAGER_STEPS, "compiled": COMPILED_STEPS, "both": STEPS})
DIFFUSERS = Suite("diffusers", "torch_neuronx.compat.pipelines.worker",
                  {"eager": ("eager",), "compiled": ("compiled",), "both": ("eager", "compiled")})


def _worker_env() -> dict:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")  # tiny models come from configs: nothing to download
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    # one thread per worker: --jobs N then uses N cores, and host kernels reduce
    # in the same order on both sides
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    return env


def _mark_unfinished(result: dict, category: str, message: str, steps: tuple[str, ...]) -> None:
    """Steps the worker never finished. Before the CPU reference passed, the CPU side failed (not counted);
    after it, the first unfinished step gets `category` (also when the worker died between steps, moving the
    model to neuron say: neuron's death, counted), and the later ones are not run."""
    running = result.get("running")
    if result.get("cpu", {}).get("status") != "pass":
        # died before the reference existed: the neuron side was never reached
        result["cpu"] = {"status": "fail", "category": category, "error": message + " (on CPU, building the reference)"}
        result["running"] = None
        return
    if running is not None:
        result["died_in"] = running
    failed = False
    for name in steps:
        if name in result["steps"]:
            continue
        if not failed:
            where = "" if running in (name, None) else f" ({running})"
            result["steps"][name] = {"status": "fail", "category": category, "error": message + where}
            failed = True
        else:
            result["steps"][name] = {"status": "not run", "error": f"not run: an earlier step ended with {category}"}
    result["running"] = None


class WorkerStartError(RuntimeError):
    """A worker ended before writing its first result: the environment is broken, not the model.

    Every other worker would fail the same way, so the run stops and says what to fix instead of
    reporting each architecture as a CPU failure (and "compatible: 0/0").
    """


def _package_seen_by_workers(env: dict, cwd: str) -> str | None:
    """Where the worker's interpreter finds `torch_neuronx`, in the worker's environment and directory."""
    probe = "import importlib.util as u; s = u.find_spec('torch_neuronx'); print(s.origin if s else '')"
    try:
        r = subprocess.run([sys.executable, "-c", probe], env=env, cwd=cwd, capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() or None


def start_failure(arch: str, worker: str, code: int, log: str, env: dict, cwd: str) -> WorkerStartError:
    """The error for a worker that could not start, with what the log says and what to do."""
    import torch_neuronx
    ours = os.path.dirname(os.path.abspath(torch_neuronx.__file__))
    seen = _package_seen_by_workers(env, cwd)
    tail = _log_tail(log) or f"exit code {code}, no output"
    lines = [f"the compat worker could not start ({arch}): `{sys.executable} -m {worker}` "
             f"ended before running any check: {tail}", f"(full log: {log})"]
    if seen and os.path.dirname(os.path.abspath(seen)) != ours:
        lines.append(f"The worker's Python imports torch_neuronx from {os.path.dirname(seen)}, but this command runs "
                     f"the one in {ours}: a torch_neuronx directory on PYTHONPATH shadows the installed package. "
                     "Fix: unset PYTHONPATH (or remove that directory from it), or install that copy "
                     "(`pip install -e .` in the source checkout builds its extension).")
    elif "torch_neuronx._C" in tail or "module specification" in tail:
        lines.append("The plugin's C++ extension cannot be loaded. Fix: rebuild it (`bash scripts/build.sh` in a "
                     "source checkout, or reinstall torch-neuronx) with the same torch it runs against.")
    else:
        lines.append(f"Fix: check that `{sys.executable} -c 'import torch, torch_neuronx'` works in this "
                     "environment.")
    return WorkerStartError("\n".join(lines))


_live: set = set()  # worker processes running now (ended if the run is interrupted)


def run_one(arch: str, mode: str, timeout: float, workdir: str, live: set | None = None,
            suite: Suite = TRANSFORMERS, core: int | None = None, source: dict | None = None) -> dict:
    """Run one architecture's worker; always returns a result dict (never raises for the model's failures).

    source: the code being run (provenance.source_state), stamped on the result with the time it finished."""
    out = os.path.join(workdir, f"{arch}.json")
    log = os.path.join(workdir, f"{arch}.log")
    out, log = os.path.abspath(out), os.path.abspath(log)
    cmd = [sys.executable, "-m", suite.worker, arch, "--mode", mode, "--out", out]
    t0 = time.monotonic()
    env = _worker_env()
    if core is not None:  # NeuronCores are exclusive per process: workers running at once use different cores
        env["NEURON_RT_VISIBLE_CORES"] = str(core)
    with open(log, "w") as logf:
        # own process group: the timeout kills the worker and anything it started. The work directory
        # as current directory: a source checkout the command was started from cannot shadow the
        # installed package in the worker (`python -m` puts the current directory first on sys.path).
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=workdir,
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
    if not timed_out and not os.path.exists(out):
        raise start_failure(arch, suite.worker, code, log, env, workdir)
    try:
        with open(out) as f:
            result = json.load(f)
    except (OSError, ValueError):
        result = {"arch": arch, "suite": suite.name, "mode": mode, "cpu": {"status": "running"}, "steps": {},
                  "compile": {}, "running": "cpu", "seconds": {}}
    if timed_out:
        _mark_unfinished(result, categories.TIMEOUT, f"timeout: no result after {timeout:.0f} s", suite.steps[mode])
    elif result.get("running") is not None or code != 0:
        tail = _log_tail(log)
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        _mark_unfinished(result, categories.CRASH, f"worker died ({how}){': ' + tail if tail else ''}",
                         suite.steps[mode])
    result["seconds"] = dict(result.get("seconds") or {}, total=elapsed)
    result["runs"] = [provenance.row_stamp(source or provenance.source_state(suite.name), mode)]
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
               on_done: Callable[[str, dict], None] | None = None, workdir: str | None = None,
               suite: Suite = TRANSFORMERS) -> dict[str, dict]:
    """Results for `archs` (arch -> result), `jobs` workers at a time."""
    own_dir = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="torchneuron-compat-")
    results: dict[str, dict] = {}
    lock = threading.Lock()
    stopping = threading.Event()
    free_cores = _worker_cores(jobs)
    source = provenance.source_state(suite.name)

    def one(arch: str) -> None:
        if stopping.is_set():
            return
        if on_start:
            on_start(arch)
        core = free_cores.get()
        try:
            r = run_one(arch, mode, timeout, workdir, _live, suite, core=core, source=source)
        finally:
            free_cores.put(core)
        if stopping.is_set():
            return  # killed by the interruption, not by its model: no verdict
        with lock:  # on_done too: the CLI's callback updates and writes one report that both workers share
            results[arch] = r
            if on_done:
                on_done(arch, r)

    try:
        _run_pool(one, archs, jobs, stopping)
    except WorkerStartError:
        own_dir = False  # keep the worker's log: the error names it
        raise
    finally:
        if own_dir:
            import shutil
            shutil.rmtree(workdir, ignore_errors=True)
    return {a: results[a] for a in archs if a in results}


def _worker_cores(jobs: int):
    """One NeuronCore per concurrent worker (a core belongs to one process at a time, as on Neuron): the first
    `jobs` cores this process may use (NEURON_RT_VISIBLE_CORES, else all) that no other process holds, so a
    matrix run next to another job on this host does not fail every architecture on a held core."""
    import queue

    from ..runtime import ownership
    from ..runtime.topology import TopologyError, discover
    topo = discover()
    free = ownership.free_cores(topo.visible, topo.lnc, ownership.held_cores(topo.instance.name))
    want = max(1, jobs)
    if len(free) < want:
        raise TopologyError(
            f"--jobs {want} needs {want} free NeuronCores, one per worker, but only {len(free)} of the "
            f"{len(topo.visible)} this run may use are free (`torchneuron ls` shows which process holds the others). "
            f"Lower --jobs, stop the holders, or choose free cores with NEURON_RT_VISIBLE_CORES.")
    cores: queue.Queue = queue.Queue()
    for core in free[:want]:
        cores.put(core)
    return cores


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
