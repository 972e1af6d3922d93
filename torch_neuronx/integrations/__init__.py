"""Where TorchNeuron reaches into another project because that project offers no fix of its own yet.

Each piece is as small as possible, limited to neuron, guarded by the version it was written for, and
documented with the upstream change that would let it be deleted.

    optim_foreach.py                  torch.optim's foreach default with parameter groups mixing DTensor and plain tensors
    context_parallel_attention.py     PyTorch's context parallelism (ring attention) for the host flash kernel neuron uses
    torch_compile_backend_context.py  torch.compile drops a named backend's backend_ctx_ctor (Dynamo's per-backend context)
    checkpoint_rng_replay.py          replaying dropout of checkpointed regions: rng_prims' fixed device table
    transformers_sliding_window.py    the static sliding-window cache's Python token count, traced as a symbolic int
    transformers_warning_once.py      Transformers' Logger.warning_once, skipped by Dynamo instead of breaking the graph
    written_for.py                    the Transformers version the Transformers shims were written for

None is installed by `import torch`: the torch compile shims when torch._dynamo is first imported, the
context-parallel one when torch's context-parallel module is, the Transformers ones only inside calls of
neuron-compiled functions.
"""
