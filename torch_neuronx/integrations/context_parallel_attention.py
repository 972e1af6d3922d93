"""PyTorch's context parallelism cannot run attention whose fused kernel is the host's (torch 2.13): neuron's.

The failure. `torch.distributed.tensor.experimental.context_parallel(mesh, buffers=...)` (what Accelerate's
`ParallelismConfig(cp_size=...)` and Transformers' Trainer use for long sequences) splits the sequence over the
ranks and turns scaled_dot_product_attention into ring attention: its inputs become DTensors sharded on the sequence
dimension, ATen decomposes SDPA into the fused kernel it picks for the device, and the DTensor dispatcher hands that
kernel to a ring implementation (`_sdpa_handler`, _context_parallel/_attention.py), which computes each block of
keys with the kernel and merges the blocks by their log-sum-exp. It knows three kernels: CUDA's flash, efficient and
cuDNN attention. ATen's SDPA (aten/src/ATen/native/transformers/attention.cpp) calls CUDA's flash kernel only for a
CUDA tensor; on every other device its flash choice is `_scaled_dot_product_flash_attention_for_cpu`, the host's
kernel, which neuron shares (aten/RegisterHostKernels.cpp) and which returns the log-sum-exp as well. The dispatcher
has no rule for it, so the first attention fails: "Operator aten._scaled_dot_product_flash_attention_for_cpu.default
does not have a sharding strategy registered" (on CPU tensors too).

The shim (installed when that module is first imported): the same ring implementation
(`_templated_ring_attention` and its backward, with the same load balancing and merge) for the host kernel and its
backward, added to the ops context parallelism dispatches while it is enabled (`custom_ops`), for neuron tensors only;
anything else keeps torch's behaviour. Outputs are sharded like the inputs (the sequence dimension, 2).

Upstream fix that removes it: list `_scaled_dot_product_flash_attention_for_cpu` and its backward in
`_sdpa_handler`'s `call_maps`, `custom_ops` and the context-parallel sharding rules (register_cp_sharding_rules),
as the CUDA kernels are.
"""

from __future__ import annotations

import warnings

import torch

WRITTEN_FOR = "2.13."
MODULE = "torch.distributed.tensor.experimental._context_parallel._attention"
SEQ_DIM = 2  # [batch, heads, sequence, head_dim], as torch's ring attention assumes

aten = torch.ops.aten


def _forward(q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    return dict(query=q, key=k, value=v, dropout_p=dropout_p, is_causal=is_causal, attn_mask=attn_mask, scale=scale)


def _backward(grad_out, q, k, v, out, logsumexp, dropout_p, is_causal, *, attn_mask=None, scale=None):
    return dict(grad_out=grad_out, query=q, key=k, value=v, out=out, logsumexp=logsumexp, dropout_p=dropout_p,
                is_causal=is_causal, attn_mask=attn_mask, scale=scale)


def _handler(op_call, args, kwargs):
    """The DTensor dispatcher's handler of the host flash kernel (and its backward) under context parallelism."""
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
    from torch.distributed.tensor.experimental._context_parallel import _attention as cp

    op_info = DTensor._op_dispatcher.unwrap_to_op_info(op_call, args, kwargs)
    specs = [s for s in op_info.flat_args_schema if isinstance(s, DTensorSpec)]
    mesh = op_info.compute_mesh
    local = (_forward if op_call is aten._scaled_dot_product_flash_attention_for_cpu.default else _backward)(
        *op_info.local_args, **op_info.local_kwargs)
    if local["query"].device.type != "neuron":
        raise NotImplementedError(
            f"context parallelism runs {op_call} on neuron tensors only (torch_neuronx/integrations/"
            "context_parallel_attention.py); torch itself supports CUDA's flash, efficient and cuDNN attention")
    if mesh.ndim != 1 or any(s.placements != (Shard(SEQ_DIM),) for s in specs):
        raise NotImplementedError(f"context parallelism of {op_call}: every input must be sharded on the sequence "
                                  f"dimension of a 1-D mesh, got {[s.placements for s in specs]}")
    if local.pop("attn_mask") is not None:
        raise NotImplementedError("context parallelism supports causal attention without a mask (is_causal=True), as "
                                  "torch's ring attention does")
    group = mesh.get_group()

    def spec(local_tensor, global_shape):
        meta = TensorMeta(torch.Size(global_shape), torch.empty(global_shape, device="meta").stride(),
                          local_tensor.dtype)
        return DTensorSpec(mesh, (Shard(SEQ_DIM),), tensor_meta=meta)

    q_shape = specs[0].tensor_meta.shape if op_call is aten._scaled_dot_product_flash_attention_for_cpu.default \
        else specs[1].tensor_meta.shape
    if op_call is aten._scaled_dot_product_flash_attention_for_cpu.default:
        out, logsumexp = cp._templated_ring_attention(group, SEQ_DIM, aten._scaled_dot_product_flash_attention_for_cpu,
                                                      **local)[:2]
        specs_out = (spec(out, q_shape), spec(logsumexp, q_shape[:3]))
        return DTensor._op_dispatcher.wrap((out, logsumexp), specs_out)
    grads = cp._templated_ring_attention_backward(
        group, SEQ_DIM, aten._scaled_dot_product_flash_attention_for_cpu_backward.default, grad_out_name="grad_out",
        **local)[:3]
    k_shape, v_shape = specs[2].tensor_meta.shape, specs[3].tensor_meta.shape
    return DTensor._op_dispatcher.wrap(tuple(grads), tuple(spec(g, s) for g, s in zip(grads, (q_shape, k_shape,
                                                                                            v_shape))))


def _register() -> None:
    from torch.distributed.tensor.experimental._context_parallel import _attention as cp
    for op in (aten._scaled_dot_product_flash_attention_for_cpu.default,
               aten._scaled_dot_product_flash_attention_for_cpu_backward.default):
        cp.custom_ops.setdefault(op, _handler)


def install() -> None:
    if not torch.distributed.is_available():
        return
    if not torch.__version__.startswith(WRITTEN_FOR):
        warnings.warn(f"torch_neuronx: the context-parallel attention shim was written for torch {WRITTEN_FOR}x, not "
                      f"{torch.__version__}: not installed (torch_neuronx/integrations/context_parallel_attention.py)")
        return
    from ..compile.import_hooks import when_imported
    when_imported(MODULE, _register)
