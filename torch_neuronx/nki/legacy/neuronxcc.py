"""The top-level `neuronxcc` module where AWS's neuronx-cc is not installed: just `neuronxcc.nki` (beta 1)."""

from torch_neuronx.nki import legacy as nki  # noqa: F401

__version__ = "2.26.0+torchneuron.emulated"
