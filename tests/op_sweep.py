"""Run OpInfo samples (torch.testing op_db) on CPU and on neuron and compare.

Used by tests/test_op_sweep.py; also runnable alone to list failures:
    python tests/op_sweep.py
"""

from __future__ import annotations

import sys
import traceback

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_flatten, tree_map

# Ops whose output is not a function of their inputs (random, uninitialised memory) or that
# compare identities; they are exercised by their own tests.
NONDETERMINISTIC = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "bernoulli",
                    "normal", "rand_like", "randn_like", "randint_like", "randint", "multinomial", "uniform",
                    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
                    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout", "exponential",
                    "geometric", "cauchy", "log_normal", "nn.functional.rrelu", "empty_permuted",
                    "torch.ops.aten._efficientzerotensor", "nn.functional.fractional_max_pool2d",
                    "nn.functional.fractional_max_pool3d", "bfloat16", "byte", "char", "double", "float", "half",
                    "int", "long", "short", "bool", "cdouble", "cfloat", "chalf", "item", "to_sparse", "sparse.mm",
                    "sparse.sampled_addmm", "sparse.mm.reduce", "nonzero_static", "svd_lowrank", "pca_lowrank",
                    "linalg.lstsq", "ormqr", "new_empty", "resize_", "resize_as_", "data_ptr", "torch._refs.empty"}
# Ops whose samples do not survive .to(device) by design, on CUDA as here.
DEVICE_SEMANTICS = {
    "as_strided": "partial_views samples index into the input's storage beyond the view; .to() copies only the view",
    "tensor_split": "tensor_indices_or_sections must stay on the CPU (as on CUDA)",
    "to": "samples move tensors to the CPU",
    "broadcast_shapes": "takes shapes, not tensors: nothing runs on a device",
}


_TRACE = bool(__import__("os").environ.get("OP_SWEEP_TRACE"))


def _to(x, device):
    return x.to(device) if isinstance(x, torch.Tensor) else x


def _compare(cpu_out, dev_out) -> str | None:
    a, _ = tree_flatten(cpu_out)
    b, _ = tree_flatten(dev_out)
    if len(a) != len(b):
        return f"output structure differs: {len(a)} vs {len(b)}"
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor):
                return f"expected a tensor, got {type(y).__name__}"
            if y.device.type != "neuron":
                return f"output on {y.device}, expected neuron"
            try:
                exact = x.dtype.itemsize == 1 and x.dtype.is_floating_point  # fp8: assert_close wants exact
                tol = dict(atol=0.0, rtol=0.0) if exact else dict(atol=1e-5, rtol=1e-4)
                torch.testing.assert_close(y.cpu(), x, equal_nan=True, **tol)
            except AssertionError as e:
                return str(e).splitlines()[0]
        elif x != y and not (isinstance(x, float) and x != x and y != y):
            return f"value {y!r} != {x!r}"
    return None


def sweep(max_samples: int = 3, only: set[str] | None = None):
    """Returns (passed op names, {op name: failure}, {op name: reason skipped})."""
    passed, failed, skipped = [], {}, {}
    for op in op_db:
        name = op.name if not op.variant_test_name else f"{op.name}.{op.variant_test_name}"
        if only and op.name not in only:
            continue
        if op.name in NONDETERMINISTIC:
            skipped[name] = "nondeterministic or identity op"
            continue
        if op.name in DEVICE_SEMANTICS and (op.name != "as_strided" or op.variant_test_name == "partial_views"):
            skipped[name] = DEVICE_SEMANTICS[op.name]
            continue
        dtype = torch.float32 if torch.float32 in op.supported_dtypes("cpu") else next(
            iter(sorted(op.supported_dtypes("cpu"), key=str)), None)
        if dtype is None:
            skipped[name] = "no CPU dtype"
            continue
        try:
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:max_samples]
        except Exception as e:  # noqa: BLE001
            skipped[name] = f"sample generation failed: {e}"
            continue
        err = None
        ran = 0
        for s in samples:
            try:
                torch.manual_seed(0)
                expected = op(s.input, *s.args, **s.kwargs)
            except Exception:  # noqa: BLE001 - CPU itself rejects this sample
                continue
            dev_in = tree_map(lambda x: _to(x, "neuron"), s.input)
            dev_args = tree_map(lambda x: _to(x, "neuron"), s.args)
            dev_kwargs = tree_map(lambda x: _to(x, "neuron"), s.kwargs)
            inputs, _ = tree_flatten((s.input, s.args))
            if "device" in dev_kwargs or not any(isinstance(x, torch.Tensor) for x in inputs):  # a factory
                dev_kwargs["device"] = "neuron"
            if _TRACE:
                print("op", name, file=sys.stderr, flush=True)
            try:
                torch.manual_seed(0)
                got = op(dev_in, *dev_args, **dev_kwargs)
            except Exception as e:  # noqa: BLE001
                err = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                break
            err = _compare(expected, got)
            if err:
                break
            ran += 1
        if err:
            failed[name] = err
        elif ran:
            passed.append(name)
        else:
            skipped[name] = "no sample runs on CPU"
    return passed, failed, skipped


if __name__ == "__main__":
    import torch_neuronx
    torch_neuronx.clear_op_tracking()
    p, f, s = sweep(only=set(sys.argv[1:]) or None)
    for k, v in f.items():
        print(f"FAIL {k}: {v}")
    print(f"passed {len(p)}, failed {len(f)}, skipped {len(s)}; distinct ATen ops through the fallback: "
          f"{len(torch_neuronx.get_emulator_op_counts())}")
