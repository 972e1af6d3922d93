"""`torch_neuronx.memory`: TorchNeuron's memory API under its module path.

The functions are torch.neuron's (torch_neuronx/neuron/memory.py): memory_stats() in TorchNeuron's format,
memory_summary() ("Neuron Memory Summary"), the allocated/reserved counters and their resets.
"""

from .neuron.memory import (  # noqa: F401
    max_memory_allocated, max_memory_reserved, memory_allocated, memory_reserved, memory_stats, memory_summary,
    reset_accumulated_memory_stats, reset_peak_memory_stats)

__all__ = ["memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "reset_accumulated_memory_stats", "memory_summary"]
