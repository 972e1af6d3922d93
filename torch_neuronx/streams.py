"""`torch_neuronx.streams`: TorchNeuron's Stream and Event classes under its module path (torch.neuron's:
torch_neuronx/neuron/streams.py)."""

from .neuron.streams import Event, Stream  # noqa: F401

__all__ = ["Stream", "Event"]
