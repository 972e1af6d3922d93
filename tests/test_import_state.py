"""Installing the plugin changes no behaviour of torch or Transformers that it does not own.

`import torch` loads the plugin (torch's `torch.backends` entry point); TORCH_DEVICE_BACKEND_AUTOLOAD=0
turns that off. Two fresh processes, one each way, take the same snapshot of what the plugin could reach
into: torch.compile itself, the configurations of Dynamo, Inductor and torch.compiler, Dynamo's skip and
inline lists, and, after `import transformers`, the module-level state of the Transformers modules the
compile path uses and the logging.Logger class Transformers extends. The snapshots must be equal.
A third snapshot is taken in a plugin process around a function compiled with backend="neuron": the
backend's Dynamo settings hold during its calls only.
"""

import json

from helpers import run_python

SNAPSHOT = r'''
import importlib, inspect, json, logging, sys, types
import torch


def describe(value, depth=0):
    """A JSON-comparable description: plain values as they are, functions and classes by name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [describe(v, depth + 1) for v in value] if depth < 3 else f"<{type(value).__name__}>"
    if isinstance(value, (set, frozenset)):
        return sorted(json.dumps(describe(v, depth + 1), sort_keys=True) for v in value)
    if isinstance(value, dict):
        if depth >= 3:
            return "<dict>"
        keys = {(k if isinstance(k, str) else json.dumps(describe(k, depth + 1))): v for k, v in value.items()}
        return {k: describe(v, depth + 1) for k, v in sorted(keys.items())}
    if isinstance(value, types.ModuleType):
        return f"<module {value.__name__}>"
    if callable(value):
        code = getattr(value, "__code__", None)
        where = f" {code.co_filename}:{code.co_firstlineno}" if code is not None else ""
        return f"<{type(value).__name__} {getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', '?')}{where}>"
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def module_state(name):
    module = importlib.import_module(name)
    return {k: describe(v) for k, v in sorted(vars(module).items())
            if not k.startswith("__") and not inspect.ismodule(v)}


snapshot = {}
snapshot["plugin loaded"] = "torch_neuronx" in sys.modules
snapshot["torch.compile"] = describe(torch.compile)
snapshot["torch.compile wrapped"] = hasattr(torch.compile, "__wrapped__")
import torch._dynamo, torch._dynamo.config, torch._inductor.config, torch._dynamo.trace_rules as trace_rules
snapshot["torch._dynamo.config"] = describe(torch._dynamo.config.get_config_copy())
snapshot["torch._inductor.config"] = describe(torch._inductor.config.get_config_copy())
snapshot["torch.compiler.config"] = describe(torch.compiler.config.get_config_copy())
snapshot["dynamo skip and inline lists"] = describe({name: getattr(trace_rules, name) for name in
                                                     ("MOD_INLINELIST", "LEGACY_MOD_INLINELIST", "MOD_SKIPLIST")})
snapshot["torch.compile after dynamo"] = describe(torch.compile)
import transformers, transformers.cache_utils, transformers.generation.configuration_utils, transformers.utils.logging
snapshot["transformers"] = {name: module_state(name) for name in (
    "transformers.cache_utils", "transformers.generation.configuration_utils", "transformers.utils.logging",
    "transformers.utils.import_utils")}
snapshot["transformers CompileConfig"] = describe(dict(vars(transformers.generation.configuration_utils.CompileConfig)))
snapshot["logging.Logger"] = describe(dict(vars(logging.Logger)))
snapshot["dynamo config after transformers"] = describe(torch._dynamo.config.get_config_copy())
print("SNAPSHOT" + json.dumps(snapshot, sort_keys=True))
'''


def snapshot(env: dict) -> dict:
    r = run_python(SNAPSHOT, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(line for line in r.stdout.splitlines() if line.startswith("SNAPSHOT"))
    return json.loads(line[len("SNAPSHOT"):])


def differences(a, b, path=""):
    """Readable paths of what differs between two snapshots."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k, "<missing>"), b.get(k, "<missing>"),
                                                                          f"{path}/{k}")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_import_torch_with_the_plugin_leaves_torch_and_transformers_as_without_it():
    with_plugin = snapshot({"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"})
    without = snapshot({"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert with_plugin.pop("plugin loaded") is True and without.pop("plugin loaded") is False
    assert "torch/__init__.py" in with_plugin["torch.compile"] and not with_plugin["torch.compile wrapped"]
    assert with_plugin == without, "\n".join(differences(with_plugin, without))


AROUND_A_COMPILED_CALL = r'''
import json, logging
import torch, transformers
import torch._dynamo.config as dynamo_config

def settings():
    return {"automatic_dynamic_shapes": dynamo_config.automatic_dynamic_shapes,
            "assume_static_by_default": dynamo_config.assume_static_by_default,
            "ignore_logging_functions": sorted(f.__qualname__ for f in dynamo_config.ignore_logging_functions),
            "dynamic_sources": torch.compiler.config.dynamic_sources}

seen = {}

@torch._dynamo.disable
def record():  # called, not traced, from the compiled function: while it runs
    seen.update(settings())

def f(x):
    record()
    return x * 2

before = settings()
out = torch.compile(f, backend="neuron")(torch.ones(4, device="neuron"))
assert out.cpu().tolist() == [2.0] * 4
print("SETTINGS" + json.dumps({"before": before, "during": seen, "after": settings()}))
'''


def test_the_neuron_backend_sets_dynamos_settings_only_while_its_functions_run():
    r = run_python(AROUND_A_COMPILED_CALL, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(next(line for line in r.stdout.splitlines() if line.startswith("SETTINGS"))[len("SETTINGS"):])
    assert s["after"] == s["before"]
    assert s["before"]["automatic_dynamic_shapes"] and s["before"]["dynamic_sources"] == ""
    assert not s["before"]["ignore_logging_functions"]
    during = s["during"]
    assert during["automatic_dynamic_shapes"] is False and during["assume_static_by_default"] is True
    assert "cumulative_length_int" in during["dynamic_sources"]
    assert any("warning_once" in name for name in during["ignore_logging_functions"])


def test_an_unbuilt_checkout_shadowing_the_install_is_named_with_the_fix(tmp_path):
    # As a user hits it: `python -m torch_neuronx.cli ...` run inside a source checkout that was never
    # built, while the built package is installed. The checkout's torch_neuronx/ comes first on sys.path.
    import os
    import shutil
    import subprocess
    import sys

    import torch_neuronx

    installed = os.path.dirname(torch_neuronx.__file__)
    checkout = tmp_path / "checkout"
    shutil.copytree(installed, checkout / "torch_neuronx",
                    ignore=shutil.ignore_patterns("_C.*", "__pycache__"))
    # Our venvs install the package editable, and setuptools' editable finder would still serve the built
    # core to the copy; a regular (wheel) install has no such finder, so the run drops it first.
    run_cli_as_after_a_wheel_install = (
        "import runpy, sys; "
        "sys.meta_path[:] = [f for f in sys.meta_path if 'Editable' not in getattr(f, '__name__', type(f).__name__)]; "
        "sys.argv = ['torchneuron', 'info']; runpy.run_module('torch_neuronx.cli', run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", run_cli_as_after_a_wheel_install], cwd=checkout, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode != 0
    assert f"torch_neuronx was imported from {checkout / 'torch_neuronx'}, which has no built C++ core" in r.stderr
    assert "unset PYTHONPATH" in r.stderr and "scripts/build.sh" in r.stderr
