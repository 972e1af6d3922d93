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
from . import isa, language  # noqa: F401


def jit(func=None, mode: str = "auto", **kwargs):
    """@nki.jit (beta 1): a kernel runnable with torch tensors, NumPy arrays, or as a sub-kernel (mode='trace')."""
    if func is None:
        return lambda f: Kernel(f, legacy=True, mode=mode, **kwargs)
    return Kernel(func, legacy=True, mode=mode, **kwargs)


trace = jit


def _launch(kernel) -> Launch:
    if isinstance(kernel, Launch):
        return kernel
    if not isinstance(kernel, Kernel):
        kernel = Kernel(kernel, legacy=True)
    return Launch(kernel, ())


def simulate_kernel(kernel, *args, **kwargs):
    """nki.simulate_kernel(kernel[grid], *np_arrays): run on the emulated core; returns NumPy arrays."""
    launch = _launch(kernel)
    return simulate_numpy(launch.kernel, launch.grid, launch.kernel.bind(args, kwargs))


def baremetal(kernel=None, **kwargs):
    """nki.baremetal(kernel): on Trainium it runs the kernel on a NeuronCore with NumPy arrays; here it runs on the
    emulated core (the same as simulate_kernel)."""
    if kernel is None:
        return lambda k: baremetal(k, **kwargs)
    launch = _launch(kernel)

    class _Baremetal:
        def __getitem__(self, grid):
            inner = launch.kernel[grid]
            return lambda *a, **k: simulate_numpy(inner.kernel, inner.grid, inner.kernel.bind(a, k))

        def __call__(self, *a, **k):
            return simulate_numpy(launch.kernel, launch.grid, launch.kernel.bind(a, k))

    return _Baremetal()


def benchmark(kernel=None, **kwargs):
    raise NotImplementedError("nki.benchmark measures a kernel on a NeuronCore; the emulator has none. For the "
                              "estimated cost per engine see torch_neuronx.nki.statistics() (docs/nki.md)")


def profile(func=None, **kwargs):
    raise NotImplementedError("nki.profile captures a device profile; the emulator has none. Use torch.profiler "
                              "(the `nki <kernel> [estimate ...]` ranges) or torch_neuronx.nki.statistics()")


tensor = language.NkiTensor
