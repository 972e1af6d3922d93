"""Shared test setup: the plugin is loaded by `import torch` itself (autoload)."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The tests are written for the 64-core trn2.48xlarge; without TORCHNEURON_INSTANCE the emulated instance
# would depend on the host's CPUs and RAM (torch_neuronx.runtime.default_instance, tested on its own).
os.environ.setdefault("TORCHNEURON_INSTANCE", "trn2.48xlarge")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# NeuronCores are exclusive per process (torch_neuronx/runtime/ownership.py). Each pytest session gets its
# own core registry, so concurrent sessions on one machine never see each other's cores; within a session
# the pytest process (which uses cores in-process) and the processes the tests start use two registries,
# so a test's subprocess is not refused the core the test runner itself used. Tests of ownership point
# their processes at one registry themselves.
_CORE_REGISTRY = tempfile.mkdtemp(prefix="torchneuron-test-cores-")
atexit.register(shutil.rmtree, _CORE_REGISTRY, ignore_errors=True)
os.environ["TORCHNEURON_CORE_REGISTRY"] = os.path.join(_CORE_REGISTRY, "pytest")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.neuron.init()  # the runtime starts at first device use and reads the registry then: start it on this one
os.environ["TORCHNEURON_CORE_REGISTRY"] = os.path.join(_CORE_REGISTRY, "subprocesses")

assert hasattr(torch, "neuron"), "torch_neuronx did not autoload on `import torch`: is it installed (scripts/setup.sh)?"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture
def fresh_dynamo():
    """Dynamo reset and compile counts cleared around a test, so that it counts only its own graphs
    (torch.compile tests use it for every test: `pytestmark = pytest.mark.usefixtures("fresh_dynamo")`)."""
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    yield
    torch._dynamo.reset()


# Lines a test wants in the session's summary even when it passes (`-q -ra` shows only failures): which
# architectures today's rotating compat sample ran (tests/test_compat.py).
SUMMARY_LINES = pytest.StashKey[list]()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for line in config.stash.get(SUMMARY_LINES, []):
        terminalreporter.write_line(line)
