"""Where TorchNeuron reaches into another project because that project offers no fix of its own yet.

Each piece is as small as possible, limited to neuron, guarded by the version it was written for, and
documented with the upstream change that would let it be deleted.

    optim_foreach.py  torch.optim's foreach default with parameter groups mixing DTensor and plain tensors
"""
