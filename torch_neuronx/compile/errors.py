"""Errors of torch.compile(backend="neuron")."""


class NeuronCompileError(RuntimeError):
    """A graph cannot be compiled for Neuron as requested (dynamic shapes, graph break under fullgraph)."""


class NeuronLoweringError(NeuronCompileError):
    """A graph does not lower to StableHLO, as it would not on Trainium (compile/lowering.py).

    `op` is the ATen op that failed to legalize (None if the diagnostics name none), `location` the
    line of the user's code that made it, `diagnostics` MLIR's own messages.
    """

    def __init__(self, message: str, op: str | None = None, location: str | None = None, diagnostics: str = ""):
        super().__init__(message)
        self.op = op
        self.location = location
        self.diagnostics = diagnostics


class NEFFCompilationError(Exception):
    """TorchNeuron's name for a failed NEFF compilation (neuron_dynamo_backend; raised by its eager NKI
    kernels' neuronx-cc calls, which the emulator does not make)."""


class NEFFExecutionError(Exception):
    """TorchNeuron's error for a compiled graph that cannot run as called (mixed input devices under
    TORCH_NEURONX_RETAIN_DEVICE_MODE=1)."""
