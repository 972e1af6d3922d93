"""pytest plugin: the adapters the real TorchNeuron test suite needs to run against this plugin.

Loaded by scripts/real_suite.py with `-p real_suite_plugin`; it edits nothing in the suite. Three jobs:

1. Trainium host, as the suite's own CI sees it. The suite's root conftest.py skips its session set-up
   (NEURON_RT_NUM_CORES=1, first device use) and its per-test `torch._dynamo.reset()` when
   `is_launcher_env()` says so, i.e. when /dev/neuron0 is absent, as here. The emulator is the device, so
   that function is replaced by one answering False, before any fixture runs.
2. Results that survive a crash: each test's start and each of its reports are appended to the JSON-lines
   file $REAL_SUITE_RESULTS as they happen (junit XML is written only at the end, and a test that kills the
   process would take the whole chunk's results with it). The driver restarts pytest after the last
   started test when the process dies.
3. Launch adapter, only with REAL_SUITE_LAUNCH=subprocess: the suite's distributed harness
   (tests/distributed/utils.py, DistributedTester) starts ranks with mp.spawn and sets LOCAL_RANK,
   WORLD_SIZE and NEURON_RT_VISIBLE_CORES inside each rank *after* `import torch`. A plugin that binds
   its cores when torch loads it ignores them; this replaces DistributedTester.run_test by one that
   starts each rank as `python -m real_suite_rank` with those variables set before Python starts, and
   runs the same test function in the same distributed_context. Not needed for a plugin that binds its
   cores at first device use (the default is the suite's own mp.spawn harness).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
import traceback

import pytest

_RESULTS = os.environ.get("REAL_SUITE_RESULTS")


def _write(record: dict) -> None:
    if not _RESULTS:
        return
    with open(_RESULTS, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _exception_line(report) -> tuple[str, str]:
    """(exception type, first line of its message) of a failed report, as pytest printed it."""
    longrepr = report.longrepr
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        message = crash.message or ""
        exc_type, _, rest = message.partition(":")
        if exc_type and " " not in exc_type.strip() and rest:
            return exc_type.strip(), rest.strip().splitlines()[0] if rest.strip() else ""
        return "", message.strip().splitlines()[0] if message.strip() else ""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        return "", str(longrepr[2])
    text = str(longrepr or "").strip().splitlines()
    return "", text[-1] if text else ""


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    for plugin in session.config.pluginmanager.get_plugins():
        path = getattr(plugin, "__file__", "") or ""
        if os.path.basename(path) == "conftest.py" and hasattr(plugin, "is_launcher_env"):
            plugin.is_launcher_env = lambda _session: False


def pytest_collection_modifyitems(session, config, items):
    # After a crash the driver restarts the chunk without the tests that already ran (REAL_SUITE_SKIP).
    skip_file = os.environ.get("REAL_SUITE_SKIP")
    if skip_file and os.path.exists(skip_file):
        with open(skip_file) as f:
            done = {line.strip() for line in f if line.strip()}
        kept = [item for item in items if item.nodeid not in done]
        config.hook.pytest_deselected(items=[item for item in items if item.nodeid in done])
        items[:] = kept
    _write({"event": "collected", "count": len(items), "rank": os.environ.get("RANK")})
    if os.environ.get("REAL_SUITE_LAUNCH") == "subprocess":
        harness = sys.modules.get("tests.distributed.utils")
        if harness is not None:
            harness.DistributedTester.run_test = _run_ranks_as_subprocesses


def pytest_collectreport(report):
    # A test file that fails to import (a module only the real package has): one error for the file.
    if report.failed:
        exc_type, message = _exception_line(report)
        if not exc_type:
            text = str(report.longrepr or "")
            found = [line for line in text.splitlines() if line.startswith("E   ")]
            line = found[-1][4:] if found else message
            exc_type, _, rest = line.partition(":")
            exc_type, message = (exc_type.strip(), rest.strip()) if rest else ("", line)
        _write({"event": "report", "nodeid": report.nodeid, "when": "collect", "outcome": "failed",
                "rank": os.environ.get("RANK"), "exc_type": exc_type, "message": message})


def pytest_runtest_logstart(nodeid, location):
    _write({"event": "start", "nodeid": nodeid, "rank": os.environ.get("RANK")})


def pytest_runtest_logreport(report):
    record = {"event": "report", "nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
              "rank": os.environ.get("RANK"), "duration": round(report.duration, 3)}
    if hasattr(report, "wasxfail"):
        record["xfail"] = True
    if report.outcome != "passed":
        record["exc_type"], record["message"] = _exception_line(report)
    _write(record)


# --- launch adapter -----------------------------------------------------------------------------------


def _run_ranks_as_subprocesses(self, test_fn, **func_args):
    """DistributedTester.run_test with each rank a fresh process whose environment is set before start."""
    from tests.distributed.utils import get_free_port
    from tests.utils.neuron_test_utils import get_core_start_index

    port = get_free_port()
    with tempfile.TemporaryDirectory(prefix="real-suite-ranks-") as tmp:
        payload = os.path.join(tmp, "payload.pkl")
        with open(payload, "wb") as f:
            pickle.dump((test_fn, func_args, self.world_size, self.process_index, port), f)
        procs = []
        for rank in range(self.world_size):
            env = dict(os.environ, MASTER_ADDR="localhost", MASTER_PORT=port, WORLD_SIZE=str(self.world_size),
                       LOCAL_WORLD_SIZE=str(self.world_size), RANK=str(rank), LOCAL_RANK=str(rank),
                       NEURON_RT_VISIBLE_CORES=str(get_core_start_index() + rank))
            env.pop("REAL_SUITE_RESULTS", None)  # ranks report through their exit status
            log = open(os.path.join(tmp, f"rank{rank}.log"), "w+")
            procs.append((rank, subprocess.Popen([sys.executable, "-m", "real_suite_rank", payload], env=env,
                                                 stdout=log, stderr=subprocess.STDOUT), log))
        deadline = time.monotonic() + float(os.environ.get("REAL_SUITE_RANK_TIMEOUT", "300"))
        failures = []
        for rank, proc, log in procs:
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.seek(0)
            output = log.read()
            log.close()
            if proc.returncode != 0:
                failures.append((rank, proc.returncode, output[-4000:]))
        for _, proc, _ in procs:  # one failed rank may leave the others waiting in a collective
            if proc.poll() is None:
                proc.kill()
        if failures:
            rank, code, output = failures[0]
            lines = [line for line in output.strip().splitlines() if line.strip()]
            last = lines[-1] if lines else "no output"
            raise RuntimeError(f"rank {rank} failed (exit {code}): {last}\n{output}") from None


def _rank_main(payload: str) -> int:
    """Body of `python -m real_suite_rank PAYLOAD`: one rank of a DistributedTester test."""
    with open(payload, "rb") as f:
        test_fn, func_args, world_size, process_index, port = pickle.load(f)
    import torch
    from tests.distributed.utils import distributed_context

    rank = int(os.environ["RANK"])
    try:
        with distributed_context("localhost", port, rank, world_size, process_index):
            test_fn(rank, world_size, func_args)
            torch.neuron.synchronize()
    except BaseException:
        traceback.print_exc()
        return 1
    return 0
