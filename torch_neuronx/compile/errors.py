"""Errors of torch.compile(backend="neuron")."""


class NeuronCompileError(RuntimeError):
    """A graph cannot be compiled for Neuron as requested (dynamic shapes, graph break under fullgraph)."""
