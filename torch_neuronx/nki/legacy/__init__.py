"""neuronxcc.nki: the beta-1 NKI API (Neuron SDK 2.20-2.26), which most public kernels are written in.

`from neuronxcc import nki`, `import neuronxcc.nki.language as nl`, `neuronxcc.nki.isa as nisa`,
`neuronxcc.nki.typing as nt` resolve here where AWS's neuronx-cc is not installed (importer.py). What runs:
@nki.jit kernels with returning ISA calls, nl.arange / nl.mgrid subscripts and `mask=`, tile operators
(`a + b`, `psum += nl.matmul(...)`), affine_range (checked for parallel-iteration conflicts), sequential /
static ranges, nt.mutable_tensor parameters, SPMD grids (`kernel[2, 4]`, nl.program_id), nki.simulate_kernel
and nki.baremetal (both run on the emulated core). docs/nki.md lists what does not.
"""

from __future__ import annotations

from .. import typing  # noqa: F401
from ..errors import NkiError  # noqa: F401
from ..kernel import Kernel, Launch, simulate_numpy
from . import compiler, isa, language  # noqa: F401


def jit(func=None, mode: str = "auto", **kwargs):
    """@nki.jit (beta 1): a kernel runnable with torch tensors, NumPy arrays, or as a sub-kernel (mode='trace')."""
    if func is None:
        return lambda f: Kernel(f, legacy=True, mode=mode, **kwargs)
    return Kernel(func, legacy=True, mode=mode, **kwargs)


trace = jit


def _launch(kernel) -> Launch:
    if isinstance(kernel, _Baremetal):
        return kernel.launch
    if isinstance(kernel, Launch):
        return kernel
    if not isinstance(kernel, Kernel):
        kernel = Kernel(kernel, legacy=True)
    return Launch(kernel, ())


def simulate_kernel(kernel, *args, **kwargs):
    """nki.simulate_kernel(kernel[grid], *np_arrays): run on the emulated core; returns NumPy arrays."""
    launch = _launch(kernel)
    return simulate_numpy(launch.kernel, launch.grid, launch.kernel.bind(args, kwargs))


class _Baremetal:
    """nki.baremetal(kernel)[grid](*np_arrays): on Trainium it runs the kernel on a NeuronCore; here it runs on
    the emulated core (the same as simulate_kernel)."""

    def __init__(self, launch: Launch):
        self.launch = launch

    def __getitem__(self, grid):
        return _Baremetal(self.launch.kernel[grid])

    def __call__(self, *args, **kwargs):
        return simulate_kernel(self.launch, *args, **kwargs)


def baremetal(kernel=None, **kwargs):
    if kernel is None:
        return lambda k: baremetal(k, **kwargs)
    return _Baremetal(_launch(kernel))


class _DeviceOnly:
    """nki.benchmark / nki.profile: decorating works (test modules do it at import); running says why not."""

    def __init__(self, what: str, kernel=None):
        self.what, self.kernel = what, kernel

    def __call__(self, *args, **kwargs):
        if self.kernel is None and len(args) == 1 and not kwargs and callable(args[0]):
            return _DeviceOnly(self.what, args[0])
        raise NotImplementedError(
            f"nki.{self.what} measures a kernel on a NeuronCore; the emulator has none. The estimated cost per engine "
            "is in torch_neuronx.nki.statistics() and in torch.profiler's `nki <kernel> [estimate ...]` ranges "
            "(docs/nki.md); nki.simulate_kernel / nki.baremetal run the kernel")

    def __getitem__(self, grid):
        return self


def benchmark(kernel=None, **kwargs):
    return _DeviceOnly("benchmark", kernel)


def profile(func=None, **kwargs):
    return _DeviceOnly("profile", func)


tensor = language.NkiTensor
