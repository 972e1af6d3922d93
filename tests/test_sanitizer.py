"""The C++ core under AddressSanitizer + UndefinedBehaviorSanitizer (scripts/sanitize.sh, docs/testing.md).

CI runs this subset against the sanitized build: tests/test_device.py, the fast property test
(tests/test_properties.py), every 8th OpInfo of the op sweep and the Llama training step of tests/test_training.py
(the whole op sweep and training file under ASan do not fit CI's time budget next to the rest of the suite;
`bash scripts/sanitize.sh` runs all of them). The first run builds the
sanitized extension into build/sanitize (minutes); later runs reuse it.
"""

import os
import subprocess

import pytest
import torch_neuronx

from helpers import ROOT

SANITIZE = os.path.join(ROOT, "scripts", "sanitize.sh")


def sanitize(*pytest_args, cwd=ROOT):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "PYTEST_ADDOPTS")}
    return subprocess.run(["bash", SANITIZE, *pytest_args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=1800)


@pytest.mark.slow
def test_ci_subset_has_no_sanitizer_report():
    r = sanitize("tests/test_device.py", "tests/test_properties.py::test_common_ops_match_cpu_bit_for_bit",
                 "tests/test_training.py::test_llama_forward_backward_adamw_matches_cpu",
                 "tests/test_sanitizer.py::test_op_sweep_part")
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-5000:]
    assert "sanitize: no ASan/UBSan report" in r.stdout
    assert "torch_neuronx._C from " + os.path.join(ROOT, "build", "sanitize") in r.stdout


@pytest.mark.slow
def test_a_use_after_free_of_device_memory_fails_the_sanitized_run(tmp_path):
    """The harness itself: a write into a neuron tensor's memory after the tensor died (the pointer outlived its
    storage, the bug the zero-copy aliases could hide) must fail the run and print the report naming the
    device allocator's free, even from a subprocess of a test that ignores its crash. This also shows device
    memory is freed back to ASan's heap at once: the sanitized build keeps no freed host blocks
    (csrc/runtime/HostBlockCache.h), which would hide a stale pointer."""
    (tmp_path / "test_uaf.py").write_text(
        "import ctypes, os, subprocess, sys\n"
        "def test_uaf_in_a_subprocess():\n"
        "    code = ('import ctypes, torch; x = torch.ones(16, device=\"neuron\"); p = x.data_ptr(); del x; '\n"
        "            'ctypes.memset(p, 0, 64)')\n"
        "    env = dict(os.environ, TORCHNEURON_CORE_REGISTRY='off')  # no core ownership outside the suite's conftest\n"
        "    subprocess.run([sys.executable, '-c', code], env=env)  # its crash is ignored here\n")
    r = sanitize(str(tmp_path / "test_uaf.py"))
    assert r.returncode != 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "1 passed" in r.stdout  # the test ignored the crash: the report alone failed the run
    assert "heap-use-after-free" in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    assert "neuron::rt::release" in r.stderr, r.stderr[-3000:]  # freed by the device allocator


@pytest.mark.skipif("build/sanitize" not in torch_neuronx._C.__file__,
                    reason="the sanitized CI subset's slice of the op sweep: runs under scripts/sanitize.sh only "
                           "(test_ci_subset_has_no_sanitizer_report); tests/test_op_sweep.py runs all of it")
def test_op_sweep_part():
    """Every 8th OpInfo of the op sweep, under the sanitized build."""
    from torch.testing._internal.common_methods_invocations import op_db

    from op_sweep import sweep
    names = {op.name for op in op_db[::8]}
    passed, failed, _ = sweep(max_samples=2, only=names)
    assert not failed, failed
    assert len(passed) >= 50
