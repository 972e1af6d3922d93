#!/usr/bin/env python3
"""Run the real TorchNeuron test suite against the installed torch_neuronx, and count its failures by class.

The suite belongs to AWS's TorchNeuron (a public source copy: GitHub parmoham-aws/test-repo-parmoham, April 2026
snapshot); it is not vendored here. Point this script at a local checkout of that repository:

    .venv/bin/python scripts/real_suite.py --checkout /path/to/checkout                # every chunk, then the report
    .venv/bin/python scripts/real_suite.py --checkout DIR --chunk core --chunk memory   # some chunks
    .venv/bin/python scripts/real_suite.py --report                                    # the report of what ran
    .venv/bin/python scripts/real_suite.py --list                                      # chunks, and what is not run

(or TORCHNEURON_REAL_SUITE=DIR instead of --checkout). Chunks are independent pytest sessions, so the suite can
run a chunk at a time (each takes minutes; run them under the machine's heavy-job lock). Results accumulate in
--out (default $TMPDIR/torchneuron-real-suite) until --fresh.

What the run needs beyond the suite itself, all in scripts/real_suite/ (docs/testing.md):
- real_suite_plugin.py: the suite's conftest must see a Trainium host (else it skips its set-up), results are
  recorded per test as they happen (a crash costs one test: the chunk restarts after it), and the optional
  launch adapter (--launch subprocess) for plugins that bind their cores at import;
- a copy of the suite's tests/ and conftest.py in --out (run from the checkout, its own torch_neuronx/ source
  directory would shadow the installed plugin).
The suite's test utilities import pytest-xdist's `worker_id` fixture: pytest-xdist is in the `test` extra.

Classification: each failed or errored test is put in the first class of CLASSES whose exception type and message
match its first error line; "n/a" classes are tests of the real package's internals (they import modules or
private `_C` functions only it has) and are counted out of the applicable tests, like the files in NOT_RUN.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ADAPTERS = os.path.join(HERE, "real_suite")


@dataclass
class Chunk:
    name: str
    paths: list[str]
    timeout: int = 120                     # per test (pytest-timeout)
    args: list[str] = field(default_factory=list)
    torchrun: int = 0                      # >0: run under torchrun with this many ranks (report rank 0)
    env: dict[str, str] = field(default_factory=dict)
    what: str = ""


CHUNKS = [
    # One NeuronCore per process, as the suite's CI gives each non-distributed worker (its conftest's
    # pytest_configure_node); the multi_device tests run in a session of their own there.
    Chunk("core", ["tests/device", "tests/memory", "tests/streams", "tests/autocast", "tests/allocator",
                   "tests/storage", "tests/views", "tests/cpu_fallback", "tests/profiler/test_profiler_integration.py"],
          args=["--ignore=tests/device/test_device_lnc1_all_cores.py", "--ignore=tests/device/test_multi_device.py"],
          env={"NEURON_RT_NUM_CORES": "1"},
          what="device, memory, streams, autocast, allocator, storage, views, CPU fallback, torch.profiler"),
    # 8 cores, as the suite's CI gives a worker of its distributed session (the instance's cores over its
    # workers) and as the tests expect ("Valid range is 0 to 7"): an instance with at least 8.
    Chunk("multi_device", ["tests/device/test_multi_device.py"],
          env={"TORCHNEURON_INSTANCE": "trn2.48xlarge", "NEURON_RT_NUM_CORES": "8"},
          what="several NeuronCores in one process"),
    # Its own session: the suite's conftest sets NEURON_LOGICAL_NC_CONFIG=1 only when every test of the session
    # is an LNC=1 test.
    # On the instance it names (trn2.48xlarge: 128 cores at LNC=1), where the plugin refuses 128 devices as
    # TorchNeuron 2.33 does (docs/fidelity.md, "visible-device limit").
    Chunk("lnc1", ["tests/device/test_device_lnc1_all_cores.py"], env={"TORCHNEURON_INSTANCE": "trn2.48xlarge"},
          what="LNC=1: 128 devices"),
    Chunk("operations", ["tests/operations"], what="copies, resize, set_, clone, scalars, unary ops"),
    Chunk("python_ops", ["tests/python_ops"], timeout=200, what="per-op correctness against CPU, op tracking"),
    Chunk("vertical", ["tests/vertical"], timeout=200,
          args=["--ignore=tests/vertical/test_neuron_ops_perf.py"],
          what="OpInfo correctness and backward over the real plugin's registered ops"),
    Chunk("compile", ["tests/neuron_dynamo_backend/component", "tests/neuron_dynamo_backend/e2e",
                      "tests/neuron_dynamo_backend/unit/test_aliasing_executor.py"], timeout=200,
          args=["--ignore=tests/neuron_dynamo_backend/component/attention/test_flex_attention.py",
                "--ignore=tests/neuron_dynamo_backend/component/attention/test_flex_attention_e2e.py",
                "--ignore=tests/neuron_dynamo_backend/component/caching/test_megacache.py"],
          what="torch.compile(backend='neuron'): sanity, attention, random ops, aliasing"),
    # The suite's distributed tests run up to 8 ranks on one host, one NeuronCore each (its classes of world size
    # 8): the host it was written for is a trn2.48xlarge (64 cores), which a small host's default emulated
    # instance (trn2.3xlarge, 4 cores) is not; on a trn2.3xlarge the real one could not bind 8 ranks either.
    Chunk("distributed", ["tests/distributed/collective_ops", "tests/distributed/ddp_tests",
                          "tests/distributed/device", "tests/distributed/process_group/test_backend_registration.py"],
          timeout=300, env={"TORCHNEURON_INSTANCE": "trn2.48xlarge"},
          what="collectives, DDP, multi-device with a process group (the suite's mp.spawn harness)"),
    # Its docstring: run under torchrun with 2 processes.
    Chunk("process_group", ["tests/distributed/process_group/test_process_group_neuron.py"], timeout=300, torchrun=2,
          env={"TORCHNEURON_INSTANCE": "trn2.48xlarge"}, what="ProcessGroupNeuron under torchrun (rank 0 reported)"),
    # The configs whose models are tiny; the others are full-width models (minutes each on 2 host cores).
    Chunk("huggingface", ["tests/huggingface/test_hf_models.py"], timeout=300, args=["-k", "tiny"],
          what="random-init tiny Transformers CausalLMs, forward + backward"),
]
CHUNK_BY_NAME = {c.name: c for c in CHUNKS}

# Whole files and directories of the suite that are not run, with the reason.
NOT_RUN = {
    "tests/nki": "NKI kernels: need neuronxcc.nki (the Neuron compiler's package, not on PyPI)",
    "tests/kernels": "the real package's XLA/JAX kernel classes and its neuronx-cc wrapper (internals; jax)",
    "tests/xla_builder": "the real package's HLO builder (internals)",
    "tests/neuron_dynamo_backend/unit": "unit tests of the real backend's passes, executor, config, stablehlo "
                                        "utilities (internals; test_aliasing_executor.py is run)",
    "tests/neuron_dynamo_backend/component/attention/test_flex_attention.py": "imports the real decompositions",
    "tests/neuron_dynamo_backend/component/attention/test_flex_attention_e2e.py": "imports the real decompositions",
    "tests/neuron_dynamo_backend/component/caching/test_megacache.py": "reads the real NEFF cache through _C",
    "tests/cache": "the real persistent NEFF cache through _C cache statistics (internals)",
    "tests/profiler/test_neuron_profiling.py": "the NRT device profiler (hardware)",
    "tests/distributed/neuron_dynamo_backend": "imports the real backend's internals",
    "tests/distributed/dtensor": "helpers of the real package only",
    "tests/distributed/cache": "the real NEFF cache through _C cache statistics (internals)",
    "tests/distributed/collective_perf": "a benchmark, not a test",
    "tests/distributed/test_utils.py": "tests the real package's distributed utilities (internals)",
    "tests/distributed/process_group/test_process_group.py": "the real ProcessGroupNeuron's Python internals",
    "tests/vertical/test_neuron_ops_perf.py": "performance against Trainium numbers",
    "tests/pytorch_tests": "PyTorch's own test files driven by JSON specs: needs a PyTorch source checkout and neuronxcc",
    "tests/blocks": "Trainium performance blocks",
    "tests/csrc": "C++ unit tests of the real core",
    "tests/integration": "a placeholder",
    "tests/unit": "the real package's internals",
}

# (class, exception types or None for any, message pattern). First match wins; "n/a" classes are not applicable.
CLASSES = [
    ("n/a: real package internals", None,
     r"No module named 'torch_neuronx\.(python_ops|kernels|nki_kernel|xla|csrc|protos|_build_config|"
     r"type_converter_base|neuron_dynamo_backend\.(fx|utils|decompositions|executor|compile|settings))|"
     r"module 'torch_neuronx(\._C)?' has no attribute '_|module 'torch_neuronx' has no attribute 'python_ops'|"
     r"torch_neuronx\._C(\.\w+)*' has no attribute|"
     r"does not have the attribute '_|Expected '\w+' to (be|have been) called|"
     r"has no attribute 'NeuronCachingAllocator'"),
    ("n/a: needs neuronxcc, jax or torch-mlir", None, r"No module named '(neuronxcc|jax|jaxlib|torch_mlir|libneuronxla)"),
    ("crashed the process", ("crash",), r""),
    ("timeout", None, r"^Timeout|Timeout \(>|Failed: Timeout"),
    ("op tracking (get_executed_ops / get_fallback_ops)", None,
     r"did not run on Neuron|ran on Neuron instead of falling back|was not tracked in execution|"
     r"ran on Neuron when it should not|fell back to CPU when it should not|ran on Neuron when it was not expected"),
    ("op the real plugin lowers has no CPU kernel", ("NotImplementedError",), r"Could not run 'aten::"),
    ("cores bound at import (late NEURON_RT_VISIBLE_CORES / LOCAL_RANK)", None, r"RankBindingError|holds \d+ NeuronCores"),
    ("topology", None, r"TopologyError|at most 127 devices"),
    ("no SDPA backend", None, r"No viable backend"),
    ("expected error not raised", None, r"DID NOT RAISE|not raised"),
    ("error message or type differs", None, r"Regex pattern did not match|does not match|Expected .*Error"),
    ("numerics differ from the expectation", None,
     r"(Tensor-likes|Scalars) are not (close|equal)|not close|Mismatched elements|Greatest absolute difference"),
]


# Classes by node id, before the message rules: differences the docs justify one by one (docs/fidelity.md),
# tests that need Trainium hardware, and tests of the real package's internals that fail by assertion.
BY_TEST = [
    (r"test_memory_stats\.py::.*test_reserved_bytes_currently_zero",
     "justified: expects reserved memory 0 (the April snapshot had no caching allocator); the Neuron 2.33 docs: "
     "reserved >= allocated, and here reserved == allocated"),
    (r"test_stream_creation\.py::.*test_single_stream_mode_default",
     "justified: expects user streams collapsed to the default stream (the runtime's single-stream mode without "
     "NEURON_RT_ENABLE_HOST_CC=1); the emulator keeps PyTorch's distinct streams, all synchronous"),
    (r"test_profiler_integration\.py::.*test_profiler_end_to_end",
     "needs Trainium: the NRT device profile (ntff, neff files), which the emulator does not have"),
    (r"test_allocator\.py::.*test_allocator_module_exists|test_allocator\.py::.*test_empty_cache_works",
     "n/a: real package internals"),
    (r"test_neuron_module\.py::.*test_set_device_(int|none|torch_device|zero|torch_device_zero)$",
     "n/a: real package internals"),  # they mock torch_neuronx.set_device, which torch.neuron.set_device calls there
    # PyTorch's behaviour wins over the April snapshot's (docs/fidelity.md, "Errors and argument rules").
    (r"test_neuron_module\.py::.*test_get_device_name(_with_device_object)?$",
     "justified: expects get_device_name(1) / ('neuron:2') to name a core this one-core process does not see "
     "(the snapshot formats any index); like torch.cuda.get_device_name, a missing device raises here"),
    (r"test_device_lnc1_all_cores\.py::",
     "justified: expects 128 devices at LNC=1; the Neuron 2.33 release information: TorchNeuron refuses 128 or "
     "more visible devices (here a TopologyError naming the fix)"),
    (r"test_event_synchronization\.py::.*test_event_elapsed_time_no_timing",
     "justified: expects RuntimeError; PyTorch's events (c10 InlineEvent, CUDA) raise ValueError 'Both events "
     "must be created with argument enable_timing=True'"),
    (r"test_contiguous_ops\.py::.*test_contiguous_rejects_unsupported_memory_format",
     "justified: expects channels_last refused (the snapshot's contiguous op); PyTorch supports channels_last "
     "on every device and the plugin's kernels run it"),
    (r"test_copy_from_and_resize\.py::.*(test_copy_from_cpu_different_size_error|"
     r"test_copy_from_neuron_to_neuron_error|test_copy_neuron_to_cpu_error)",
     "justified: expects _copy_from_and_resize limited to CPU -> neuron into an empty or same-size tensor; it "
     "is PyTorch's CPU-fallback write-back, which must also resize an out= tensor the CPU kernel resized"),
    (r"test_add\.py::.*test_add_inplace_non_contiguous_output",
     "justified: expects in-place add on a column view refused (the snapshot's kernel limit); PyTorch "
     "writes through views on every device"),
    (r"test_amax_amin\.py::.*test_op_with_out_different_dtype\[",
     "justified: expects TypeError; PyTorch (CPU, CUDA) raises RuntimeError with that sentence, as the "
     "suite's own _cpu variant asserts"),
    (r"test_cumsum\.py::.*test_cumsum_string_dim",
     "justified: expects RuntimeError; PyTorch's argument parser raises TypeError for dim='invalid'/None on "
     "every device"),
    (r"test_flip\.py::.*test_flip_repeated_dims",
     "justified: a test bug: its CPU-path regex (match_cpu) has an unbalanced parenthesis, so pytest fails it "
     "for any plugin; the error raised is PyTorch's 'dim 1 appears multiple times in the list of dims'"),
    (r"test_foreach_ops\.py::.*test_foreach_add_scalarlist_mismatched_length",
     "justified: expects ValueError; PyTorch raises RuntimeError 'Tensor list must have same number of "
     "elements as scalar list' on every device"),
    (r"test_index\.py::.*test_out_of_bounds_indexing_raises_error",
     "justified: expects RuntimeError; PyTorch raises IndexError 'index 15 is out of bounds for dimension 0 "
     "with size 4' on every device"),
    (r"test_index_copy\.py::.*(test_index_copy_with_input_empty_broadcast|"
     r"test_index_copy_with_different_slice_shapes)",
     "justified: expects the JAX lowering's ValueError 'Incompatible shapes for broadcasting'; PyTorch raises "
     "its own index_copy_ shape errors (IndexError/RuntimeError)"),
    (r"test_index_select\.py::.*(test_index_select_with_index_dtype_float|test_index_select_with_incorrect_value)",
     "justified: expects TypeError for a float index (or a float dim); PyTorch raises RuntimeError "
     "'index_select(): Expected dtype int32 or int64 for index' (and its own argument error)"),
    (r"test_index_select_backward\.py::.*test_index_select_backward_float_indices",
     "justified: expects TypeError; PyTorch raises RuntimeError 'index_add_(): Expected dtype int32/int64 "
     "for index' on every device"),
    (r"test_native_multi_head_attention\.py::.*(test_native_multi_head_attention_basic|"
     r"test_native_multi_head_attention_not_implemented_need_weights|"
     r"test_native_multi_head_attention_not_implemented_mask)",
     "justified: expects the snapshot's limits (an empty weights tensor, need_weights=True and mask tensors "
     "refused); PyTorch returns None for unrequested weights and computes both"),
    (r"test_native_multi_head_attention\.py::.*test_native_multi_head_attention_xla_fallback_short_sequence",
     "justified: expects the snapshot's warning that a sequence not a multiple of 512 leaves its NKI flash "
     "kernel for an XLA path; here every length runs the same kernel, there is no switch to announce"),
    (r"test_scalar_tensor\.py::.*test_scalar_tensor_pin_memory",
     "justified: expects pin_memory=True ignored for a neuron tensor; PyTorch refuses it for every non-CPU "
     "device ('Only dense CPU tensors can be pinned')"),
    (r"test_autograd_chains\.py::.*test_no_problematic_composite_operations",
     "justified: fails on TorchNeuron too: the snapshot registers vstack, vstack.out and atleast_2d.Sequence "
     "for PrivateUse1 (its python_ops), the implicit composites this test forbids; our registered-op list is "
     "that snapshot's (torch_neuronx/registered_ops.py)"),
    (r"test_neuron_ops_backward\.py::.*test_backward\[vstack_",
     "justified: a test bug: vstack's OpInfo sample input is a tuple of tensors, which the test's "
     "sample.input.clone() cannot take; it fails before any device code, for any plugin"),
    # Distributed (docs/distributed.md, docs/fidelity.md). The real backend is a Python ProcessGroup subclass, which
    # torch hands every call whatever its tensors' device; ours is a c10d::Backend registered for the neuron device
    # (a ProcessGroup subclass breaks DeviceMesh, split_group and FSDP2 here), so torch itself routes the calls.
    (r"collective_ops/test_\w+\.py::.*(test_different_devices|test_different_devices_error|test_non_neuron_device)$",
     "justified: CPU-only tensors on a neuron group: torch raises before any backend sees them (\"No backend type "
     "associated with device type cpu\", a RuntimeError before any data moves); the real one's Python ProcessGroup "
     "raises \"Expected neuron device, got cpu\" (ours says so for a CPU tensor among neuron tensors)"),
    (r"test_process_group_neuron\.py::TestBackendName::test_backend_name",
     "justified: ProcessGroup.name() is torch's \"custom\" for any c10d::Backend plugin (the real one's Python "
     "ProcessGroup subclass says \"neuron\"); dist.get_backend() and the backend's name() say \"neuron\""),
    (r"test_process_group_neuron\.py::TestWatchdog::test_watchdog_running",
     "justified: `_watchdog` is an attribute of the real one's Python ProcessGroup subclass; torch's ProcessGroup "
     "takes no attributes, and ours needs no watchdog thread (collectives complete or raise on the caller's thread)"),
    (r"test_multi_device_with_distributed\.py::.*test_multi_process_multi_device$",
     "justified: sets NEURON_RT_VISIBLE_CORES=\"0,1\"; the Neuron 2.33 runtime docs take one core or one range, "
     "so the list is refused as invalid before the one-device-per-process check the test expects"),
    (r"test_multi_device_with_distributed\.py::.*test_vnc_id_mapping", "n/a: real package internals"),
    (r"test_reduce\.py::TestReduce::test_error_handling_invalid_root",
     "justified: expects \"Invalid rootRank N for broadcast\" from reduce (the real one's reduce reuses broadcast's "
     "check); ours raises \"Invalid rootRank N for reduce with world size W\""),
    (r"test_gather\.py::TestGather::test_invalid_root_rank",
     "justified: torch 2.13's gather raises on rank 0 (\"gather_list must NOT be specified on non-destination "
     "ranks\") before the backend sees dst=world+1; the other ranks raise \"Invalid rootRank\" in the backend"),
]


def checkout_dir(arg: str | None) -> str:
    path = arg or os.environ.get("TORCHNEURON_REAL_SUITE")
    if not path:
        sys.exit("error: no checkout of the real TorchNeuron repository: pass --checkout DIR or set "
                 "TORCHNEURON_REAL_SUITE=DIR (a local copy of GitHub parmoham-aws/test-repo-parmoham)")
    path = os.path.abspath(path)
    if not (os.path.isfile(os.path.join(path, "conftest.py")) and os.path.isdir(os.path.join(path, "tests", "utils"))):
        sys.exit(f"error: {path} is not a checkout of the real TorchNeuron repository (no conftest.py and tests/utils/)")
    return path


def check_environment(python: str) -> None:
    probe = ("import importlib.util as u, sys; "
             "missing=[m for m in ('xdist','pytest_timeout','expecttest','hypothesis') if u.find_spec(m) is None]; "
             "print(' '.join(missing))")
    missing = subprocess.run([python, "-c", probe], capture_output=True, text=True).stdout.strip()
    if missing:
        sys.exit(f"error: {python} lacks {missing}: install the test extra (bash scripts/setup.sh)")
    where = subprocess.run([python, "-c", "import torch_neuronx, os; print(os.path.dirname(torch_neuronx.__file__))"],
                           capture_output=True, text=True, cwd=tempfile.gettempdir())
    if where.returncode != 0:
        sys.exit(f"error: {python} cannot import torch_neuronx:\n{where.stderr[-2000:]}")


def prepare_copy(checkout: str, out: str) -> str:
    """The suite's tests/ and conftest.py, copied beside the results (see the module docstring)."""
    suite = os.path.join(out, "suite")
    if os.path.isdir(suite):
        shutil.rmtree(suite)
    os.makedirs(suite)
    shutil.copy2(os.path.join(checkout, "conftest.py"), suite)
    shutil.copytree(os.path.join(checkout, "tests"), os.path.join(suite, "tests"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return suite


def not_run_ignores(chunk: Chunk) -> list[str]:
    out = []
    for path in NOT_RUN:
        if any(path.startswith(p.rstrip("/") + "/") for p in chunk.paths):
            out.append(f"--ignore={path}")
    return out


def read_results(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    records = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut by a crash
    return records


def outcomes(records: list[dict], rank: str | None = None) -> dict[str, dict]:
    """nodeid -> {"outcome": passed|failed|error|skipped|xfailed|xpassed|crash, "exc_type", "message"}.

    A test that started and has no teardown report killed its process: "crash"."""
    phases: dict[str, dict[str, dict]] = {}
    for r in records:
        if rank is not None and r.get("rank") not in (None, rank):
            continue
        if r["event"] == "start":
            phases.setdefault(r["nodeid"], {})
        elif r["event"] == "report":
            phases.setdefault(r["nodeid"], {})[r["when"]] = r
    tests: dict[str, dict] = {}
    for nodeid, ph in phases.items():
        def result(outcome: str, r: dict | None = None) -> dict:
            r = r or {}
            return {"outcome": outcome, "exc_type": r.get("exc_type", ""), "message": r.get("message", "")}
        if "collect" in ph:
            tests[nodeid] = result("error", ph["collect"])
            continue
        setup, call, teardown = ph.get("setup"), ph.get("call"), ph.get("teardown")
        if setup and setup["outcome"] == "failed":
            tests[nodeid] = result("xfailed" if setup.get("xfail") else "error", setup)
        elif setup and setup["outcome"] == "skipped":
            tests[nodeid] = result("xfailed" if setup.get("xfail") else "skipped", setup)
        elif teardown is None:
            tests[nodeid] = result("crash", {"exc_type": "crash", "message": "the test process died (no report)"})
        elif call and call["outcome"] == "failed":
            tests[nodeid] = result("xfailed" if call.get("xfail") else "failed", call)
        elif call and call["outcome"] == "skipped":
            tests[nodeid] = result("xfailed" if call.get("xfail") else "skipped", call)
        elif teardown["outcome"] == "failed":
            tests[nodeid] = result("error", teardown)
        else:
            tests[nodeid] = result("xpassed" if call and call.get("xfail") else "passed")
    return tests


def classify(test: dict, nodeid: str = "") -> str:
    for pattern, cls in BY_TEST:
        if re.search(pattern, nodeid):
            return cls
    exc, msg = test.get("exc_type", "") or "", test.get("message", "") or ""
    line = f"{exc}: {msg}" if exc else msg
    for name, types, pattern in CLASSES:
        if types is not None and exc not in types:
            continue
        if re.search(pattern, line):
            return name
    short = re.sub(r"\d+", "N", line)[:90]
    return f"other: {short}"


def run_chunk(chunk: Chunk, suite: str, out: str, python: str, launch: str, extra: list[str]) -> None:
    results = os.path.join(out, f"{chunk.name}.jsonl")
    if os.path.exists(results):
        os.remove(results)
    skip_file = os.path.join(out, f"{chunk.name}.skip")
    if os.path.exists(skip_file):
        os.remove(skip_file)
    registry = tempfile.mkdtemp(prefix="real-suite-cores-")
    env = dict(os.environ)
    env.update(chunk.env)
    env.update({
        "PYTHONPATH": os.pathsep.join([ADAPTERS, suite]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "REAL_SUITE_RESULTS": results,
        "REAL_SUITE_SKIP": skip_file,
        "TORCHNEURON_CORE_REGISTRY": registry,  # cores are exclusive per process: a private registry
        "HF_HUB_OFFLINE": "1",
    })
    if launch == "subprocess":
        env["REAL_SUITE_LAUNCH"] = "subprocess"
    pytest_args = ["-m", "pytest", *chunk.paths, "-p", "real_suite_plugin", "-p", "no:cacheprovider",
                   "--continue-on-collection-errors",
                   f"--timeout={chunk.timeout}", "-q", "--no-header", "-rN", "--tb=line",
                   *not_run_ignores(chunk), *chunk.args, *extra]
    if chunk.torchrun:
        cmd = [python, "-m", "torch.distributed.run", f"--nproc-per-node={chunk.torchrun}", *pytest_args]
    else:
        cmd = [python, *pytest_args]
    crashes = 0
    start = time.monotonic()
    while True:
        log = open(os.path.join(out, f"{chunk.name}.log"), "a")
        print(f"[{chunk.name}] {' '.join(cmd[1:6])} ... (log: {log.name})", flush=True)
        proc = subprocess.run(cmd, cwd=suite, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        if proc.returncode in (0, 1, 5):
            break
        # A crash: the last test that started without a final report is the culprit; skip it and go on.
        tests = outcomes(read_results(results), rank="0" if chunk.torchrun else None)
        crashed = [n for n, t in tests.items() if t["outcome"] == "crash"]
        if not crashed or crashes >= 20:
            print(f"[{chunk.name}] pytest exited {proc.returncode}; see the log", flush=True)
            break
        crashes += 1
        with open(skip_file, "w") as f:
            f.write("\n".join(n for n in tests) + "\n")  # everything that already ran
        print(f"[{chunk.name}] process died in {crashed[-1]} (exit {proc.returncode}); continuing after it", flush=True)
    shutil.rmtree(registry, ignore_errors=True)
    print(f"[{chunk.name}] {time.monotonic() - start:.0f} s", flush=True)


def report(out: str) -> dict:
    per_chunk = {}
    classes: dict[str, list] = collections.defaultdict(list)
    for chunk in CHUNKS:
        records = read_results(os.path.join(out, f"{chunk.name}.jsonl"))
        if not records:
            continue
        tests = outcomes(records, rank="0" if chunk.torchrun else None)
        counts = collections.Counter()
        for nodeid, t in tests.items():
            o = t["outcome"]
            if o in ("failed", "error", "crash"):
                cls = classify(t, nodeid)
                classes[cls].append((nodeid, t))
                kind = cls.split(":", 1)[0]
                counts[kind if kind in ("n/a", "justified", "needs Trainium") else o] += 1
            else:
                counts[o] += 1
        counts["collected"] = len(tests)
        per_chunk[chunk.name] = counts
    total = collections.Counter()
    for c in per_chunk.values():
        total.update(c)
    cols = ["collected", "passed", "failed", "error", "crash", "justified", "needs Trainium", "skipped", "xfailed",
            "xpassed", "n/a"]
    print("\n| chunk | " + " | ".join(cols) + " | applicable | pass rate |")
    print("|---" * (len(cols) + 3) + "|")
    for name, c in list(per_chunk.items()) + [("total", total)]:
        # applicable: run here and not a test of the real package's internals or of Trainium hardware
        applicable = c["collected"] - c["n/a"] - c["needs Trainium"] - c["skipped"] - c["xfailed"]
        rate = f"{100 * (c['passed'] + c['xpassed']) / applicable:.1f}%" if applicable else "-"
        print(f"| {name} | " + " | ".join(str(c[k]) for k in cols) + f" | {applicable} | {rate} |")
    print("\n| class | tests | example (first error line) |\n|---|---|---|")
    for cls, items in sorted(classes.items(), key=lambda kv: (kv[0].startswith("n/a"), -len(kv[1]))):
        nodeid, t = items[0]
        line = f"{t.get('exc_type')}: {t.get('message')}" if t.get("exc_type") else t.get("message", "")
        print(f"| {cls} | {len(items)} | `{nodeid}`: {line[:160]} |")
    summary = {"chunks": {k: dict(v) for k, v in per_chunk.items()},
               "classes": {k: [n for n, _ in v] for k, v in classes.items()}}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"\nper-test classes: {os.path.join(out, 'summary.json')}")
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkout", help="local checkout of the real TorchNeuron repository (or TORCHNEURON_REAL_SUITE)")
    p.add_argument("--chunk", action="append", choices=[c.name for c in CHUNKS], help="run only these chunks")
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "torchneuron-real-suite"),
                   help="results directory (kept across runs, so chunks can run one at a time)")
    p.add_argument("--fresh", action="store_true", help="forget the results of earlier runs first")
    p.add_argument("--python", default=sys.executable, help="the Python with torch_neuronx installed")
    p.add_argument("--launch", choices=["spawn", "subprocess"], default="spawn",
                   help="distributed ranks: the suite's own mp.spawn harness, or the launch adapter")
    p.add_argument("--report", action="store_true", help="only print the report of the results in --out")
    p.add_argument("--list", action="store_true", help="list the chunks and what is not run, with reasons")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --), e.g. -k EXPR")
    a = p.parse_args()
    if a.list:
        for c in CHUNKS:
            print(f"{c.name:14} {c.what}: {' '.join(c.paths)}")
        print("\nnot run:")
        for path, why in NOT_RUN.items():
            print(f"  {path}: {why}")
        return
    os.makedirs(a.out, exist_ok=True)
    if a.fresh:
        for f in os.listdir(a.out):
            if f.endswith((".jsonl", ".log", ".skip")) or f == "summary.json":
                os.remove(os.path.join(a.out, f))
    if not a.report:
        checkout = checkout_dir(a.checkout)
        check_environment(a.python)
        suite = prepare_copy(checkout, a.out)
        for name in a.chunk or [c.name for c in CHUNKS]:
            run_chunk(CHUNK_BY_NAME[name], suite, a.out, a.python, a.launch, a.pytest_args)
    report(a.out)


if __name__ == "__main__":
    main()
