"""Make PrivateUse1 the `neuron` device, once per process."""

from __future__ import annotations

import torch

_done = False


def register() -> None:
    global _done
    if _done:
        return
    name = torch._C._get_privateuse1_backend_name()
    if name != "neuron":
        if name != "privateuseone":
            raise RuntimeError(
                f"Another PyTorch device plugin ('{name}') already owns the PrivateUse1 slot in this process; "
                "only one can be loaded. Uninstall it or disable autoload with TORCH_DEVICE_BACKEND_AUTOLOAD=0.")
        torch.utils.rename_privateuse1_backend("neuron")
    from . import neuron
    torch._register_device_module("neuron", neuron)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
    _run_backward_on_caller_thread()
    _register_compile_backend()
    _register_distributed_backend()
    _install_integrations()
    _done = True


def _run_backward_on_caller_thread() -> None:
    """Run backward on the thread that calls it, as for CPU tensors.

    Autograd otherwise hands every backward of a non-CPU device to a per-device
    worker thread. The emulator's kernels are synchronous host code, so the
    hand-off buys no overlap and costs a thread switch per backward; worse, the
    worker may still be freeing the graph (which needs the GIL) when the
    interpreter exits, which aborts the process. Set for the importing thread
    (autograd's setting is per thread); TORCHNEURON_AUTOGRAD_THREADS=1 restores
    PyTorch's default.
    """
    import os
    if os.environ.get("TORCHNEURON_AUTOGRAD_THREADS", "0") != "1":
        torch.autograd.set_multithreading_enabled(False)


def _register_compile_backend() -> None:
    from .compile import register as register_compile
    register_compile()


def _install_integrations() -> None:
    """Shims where PyTorch offers a hook but no fix yet (torch_neuronx/integrations/)."""
    from .integrations import context_parallel_attention, optim_foreach
    optim_foreach.install()
    context_parallel_attention.install()


def _register_distributed_backend() -> None:
    if not torch.distributed.is_available():  # a torch build without c10d: nothing to register with
        return
    from .distributed import register as register_distributed
    register_distributed()
