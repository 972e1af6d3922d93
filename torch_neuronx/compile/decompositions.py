"""How ops the host executor uses reach the lowering: as TorchNeuron's decompositions present them.

The lowering stage (lowering.py) traces its copy of each graph again through LOWERING_DECOMPOSITIONS:
the PyTorch decompositions TorchNeuron selects, ops only Inductor's decompositions make (as the ops
TorchNeuron's graphs have instead), and the host's own kernels, below.

The executed graph (host_graph.py) keeps the host's fused kernels where they are faster: attention
traced on neuron makes the host's choice (attention.py), `_scaled_dot_product_flash_attention_for_cpu`
and its backward. No StableHLO lowering exists for those, and Trainium never sees them: TorchNeuron
routes scaled_dot_product_attention through `_scaled_dot_product_fused_attention_overrideable`, whose
decomposition (its neuron_dynamo_backend/decompositions.py) is math attention - QK^T, scale, masks, a
max-subtracted softmax with its log-sum-exp, @V - and the backward of that math. So the graph that is
lowered (lowering.py) gets these decompositions, written for the same results as the host kernels'
(PyTorch's top-left causal mask, the log-sum-exp in the host kernel's accumulation dtype), so the
lowered program computes what the executed graph computes (lowering_check.py compares them).

TorchNeuron calls its flash-attention NKI kernel instead of the math when the shapes allow
(sequence lengths a multiple of 512, head dim <= 128, no mask, no dropout) and neuronx-cc is present;
an NKI kernel is a custom call neuronx-cc compiles, not StableHLO, so the math is lowered here always.
"""

from __future__ import annotations

import math

import torch

aten = torch.ops.aten


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype


def repeat_kv_heads(kv, query):
    """`kv` (a key or value) with its heads repeated to `query`'s, for grouped-query attention (heads at dim -3)."""
    if kv.dim() < 3 or query.dim() < 3 or kv.shape[-3] == query.shape[-3]:
        return kv
    return kv.repeat_interleave(query.shape[-3] // kv.shape[-3], dim=-3)


def attention_scores(query, key, attn_mask, is_causal, scale):
    """(scale * Q K^T + mask) with key heads repeated for grouped-query attention, and the repeated key."""
    key = repeat_kv_heads(key, query)
    scale = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale
    length, source = query.shape[-2], key.shape[-2]
    if is_causal:  # PyTorch's causal mask: query i sees keys 0..i (top-left aligned)
        future = torch.ones(length, source, dtype=torch.bool, device=query.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else scores + attn_mask
    return scores, key, scale


def flash_attention_for_cpu(query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    if dropout_p != 0.0:
        raise NotImplementedError("the host's flash attention with dropout has no lowering here")
    scores, _, _ = attention_scores(query, key, attn_mask, is_causal, scale)
    row_max = torch.amax(scores, dim=-1, keepdim=True)
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)  # fully masked rows
    exp = torch.exp(scores - row_max)
    total = torch.sum(exp, dim=-1, keepdim=True)
    probs = exp / total
    output = torch.matmul(probs, repeat_kv_heads(value, query))
    logsumexp = (row_max + torch.log(total)).squeeze(-1).to(_accumulation_dtype(query.dtype))
    return output, logsumexp


def flash_attention(query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
    """CUDA's flash attention with its log-sum-exp (neuron runs it for ring attention: csrc/aten/native/
    FlashAttention.cpp) as the same math: no cumulative lengths, no random state (no dropout here)."""
    output, logsumexp = flash_attention_for_cpu(query, key, value, dropout_p, is_causal, scale=scale)
    none = torch.empty(0, dtype=torch.int64, device=query.device)  # int64: torch-mlir has no uint64
    return (output, logsumexp, none, none, query.shape[-2], key.shape[-2], none, none,
            torch.empty(0, dtype=query.dtype, device=query.device))


def flash_attention_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
                             dropout_p, is_causal, philox_seed, philox_offset, *, scale=None):
    return flash_attention_for_cpu_backward(grad_out, query, key, value, out, logsumexp, dropout_p, is_causal,
                                            scale=scale)


def flash_attention_for_cpu_backward(grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *,
                                     attn_mask=None, scale=None):
    if dropout_p != 0.0:
        raise NotImplementedError("the host's flash attention with dropout has no lowering here")
    scores, key_full, scale = attention_scores(query, key, attn_mask, is_causal, scale)
    probs = torch.exp(scores - logsumexp.unsqueeze(-1).to(scores.dtype))
    heads, kv_heads = query.shape[1], value.shape[1]
    group = heads // kv_heads
    value_full = repeat_kv_heads(value, query)
    grad_value = torch.matmul(probs.transpose(-2, -1), grad_out)
    grad_probs = torch.matmul(grad_out, value_full.transpose(-2, -1))
    row = torch.sum(grad_out * out, dim=-1, keepdim=True)
    grad_scores = probs * (grad_probs - row) * scale
    grad_query = torch.matmul(grad_scores, key_full)
    grad_key = torch.matmul(grad_scores.transpose(-2, -1), query)
    if group != 1:  # the repeated heads' gradients sum into their key/value head
        b, _, s, e = grad_key.shape
        grad_key = grad_key.reshape(b, kv_heads, group, s, e).sum(2)
        grad_value = grad_value.reshape(b, kv_heads, group, s, grad_value.shape[-1]).sum(2)
    return grad_query, grad_key, grad_value


def histc(x, bins=100, min=0, max=0):
    """TorchNeuron decomposes histc (torch-mlir has no lowering): each value's bin, counted by comparison.

    As ATen: min == max means the data's range (widened by 1 each way if the data is constant); values
    outside [min, max] are not counted; the last bin includes max. Integer inputs count in float32 and
    return their own dtype (neuron's kernel, as CUDA).
    """
    values = x.flatten()
    if not values.dtype.is_floating_point:
        values = values.to(torch.float32)
    if min == max:
        lo, hi = values.min(), values.max()
        same = lo == hi
        lo, hi = torch.where(same, lo - 1, lo), torch.where(same, hi + 1, hi)
    else:
        lo = torch.full((), float(min), dtype=values.dtype, device=values.device)
        hi = torch.full((), float(max), dtype=values.dtype, device=values.device)
    index = torch.floor((values - lo) * bins / (hi - lo)).to(torch.int64)
    index = torch.where(values == hi, bins - 1, index)
    inside = (values >= lo) & (values <= hi)
    hits = (index.unsqueeze(1) == torch.arange(bins, device=values.device)) & inside.unsqueeze(1)
    return hits.sum(0).to(x.dtype)


def fmod_scalar(x, other):
    """fmod(x, scalar) as fmod(x, tensor): Inductor's decomposition of `%` makes fmod.Scalar, which torch-mlir's
    StableHLO patterns miss (fmod.Tensor lowers); TorchNeuron's graph has the remainder itself."""
    return torch.fmod(x, torch.full((), other, dtype=x.dtype, device=x.device))


def convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
                         groups, output_mask):
    """The gradients of a (non-transposed) convolution as convolutions, as TorchNeuron decomposes
    convolution_backward (torch-mlir has no lowering of it): the input's gradient a transposed convolution
    of the output's gradient; the weight's a convolution of the input by the output's gradient with the
    batch as channels (per group); the bias's a sum."""
    if transposed:
        return NotImplemented  # left as it is (and reported if it does not lower)
    spatial = list(range(2, input.dim()))
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        extra = [input.shape[i + 2] - ((grad_out.shape[i + 2] - 1) * stride[i] - 2 * padding[i] +
                                       dilation[i] * (weight.shape[i + 2] - 1) + 1) for i in range(len(spatial))]
        grad_input = aten.convolution(grad_out, weight, None, stride, padding, dilation, True, extra, groups)
    if output_mask[1]:
        n, c_in = input.shape[:2]
        c_out = grad_out.shape[1]
        rest = list(range(3, input.dim() + 1))
        # batch = input channels of a group, channels = groups x batch; weight: groups x output channels of one
        x = input.reshape(n, groups, c_in // groups, *input.shape[2:]).permute(2, 1, 0, *rest)
        x = x.reshape(c_in // groups, groups * n, *input.shape[2:])
        g = grad_out.reshape(n, groups, c_out // groups, *grad_out.shape[2:]).permute(1, 2, 0, *rest)
        g = g.reshape(c_out, n, *grad_out.shape[2:])
        w = aten.convolution(x, g, None, dilation, padding, stride, False, [0] * len(spatial), groups)
        for i, k in enumerate(weight.shape[2:]):
            w = w.narrow(i + 2, 0, k)
        grad_weight = w.transpose(0, 1)
    if output_mask[2]:
        grad_bias = grad_out.sum([0, *spatial])
    return grad_input, grad_weight, grad_bias


def topk(x, k, dim=-1, largest=True, sorted=True):
    """topk as TorchNeuron presents it (its decomposition forces sorted=True): the largest values of the last
    dimension, sorted; other dims are moved last, the smallest found as the largest of -x."""
    last = x.dim() - 1 if x.dim() else 0
    dim = dim % x.dim() if x.dim() else 0
    if dim == last and largest and sorted:
        return NotImplemented  # the form torch-mlir lowers
    y = x.movedim(dim, -1) if dim != last else x
    values, indices = aten.topk.default(-y if not largest else y, k, -1, True, True)
    values = -values if not largest else values
    if dim != last:
        values, indices = values.movedim(-1, dim), indices.movedim(-1, dim)
    return values, indices


def new_empty_strided(x, size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    """Uninitialized memory (a buffer the graph fills): zeros, which torch-mlir lowers; StableHLO has no strides."""
    return torch.zeros(size, dtype=dtype or x.dtype, device=x.device)


def index_put_with_mask(x, indices, values, accumulate=False):
    """`x[:, mask] = values` (index_put with one boolean mask, not accumulating) with static shapes: the i-th
    True position takes values' i-th entry (found by a cumulative count of the mask), the others keep x.
    torch-mlir's index_put lowering takes integer indices only; TorchNeuron's index_put decomposition turns
    masks into where/scatter the same way (for a mask the compiled graph's shapes already fix)."""
    masks = [i for i, index in enumerate(indices) if index is not None]
    if accumulate or len(masks) != 1 or indices[masks[0]].dtype != torch.bool:
        return NotImplemented
    dim, mask = masks[0], indices[masks[0]]
    flat = x.flatten(dim, dim + mask.dim() - 1) if mask.dim() > 1 else x
    keep = mask.flatten()
    rest = flat.dim() - dim - 1
    if values.dim() < flat.dim():
        values = values.reshape([1] * (flat.dim() - values.dim()) + list(values.shape))
    values = values.expand(list(flat.shape[:dim]) + [values.shape[dim]] + list(flat.shape[dim + 1:]))
    position = (torch.cumsum(keep.to(torch.int64), 0) - 1).clamp(min=0)
    taken = values.index_select(dim, position)
    out = torch.where(keep.reshape([1] * dim + [keep.numel()] + [1] * rest), taken.to(x.dtype), flat)
    return out.reshape(x.shape)


def _inductor_only_ops() -> dict:
    """Ops Inductor's own decompositions introduce that TorchNeuron's graphs never contain, as the ops
    TorchNeuron's graphs do contain: the embedding backward's masked index-put and the upsampling's
    unchecked index (PyTorch's decompositions into index ops; TorchNeuron decomposes _unsafe_index and
    _unsafe_index_put itself), `prims.fma` (softmax's backward), `prims.rev` (flip), squeeze of several
    dims (TorchNeuron decomposes it), the low-memory max pooling."""
    from torch._decomp import get_decompositions
    from torch._inductor import inductor_prims  # registers Inductor's prims (fma, the low-memory max pool)
    prims = torch.ops.prims
    table = get_decompositions([aten._unsafe_masked_index, aten._unsafe_masked_index_put_accumulate,
                                aten._unsafe_index, aten._unsafe_index_put, aten.squeeze.dims])
    table[prims.fma.default] = lambda a, b, c: a * b + c
    table[prims.rev.default] = lambda x, dims: torch.flip(x, dims)
    # Inductor's max pooling (values, and the argmax's offset in its window) by its ATen definition: the
    # ATen max_pool{2,3}d_with_indices TorchNeuron's graph has, its indices turned into offsets and back.
    table[prims._low_memory_max_pool_with_offsets.default] = inductor_prims._low_memory_max_pool_with_offsets_aten
    table[prims._low_memory_max_pool_offsets_to_indices.default] = \
        inductor_prims._low_memory_max_pool_offsets_to_indices_aten
    return table


def _torchneuron_selection() -> dict:
    """The PyTorch decompositions TorchNeuron applies before lowering (its neuron_dynamo_backend/decompositions.py
    selects them for ops torch-mlir lowers badly or not at all: unbind with a negative dim, for one). Ops
    Inductor already decomposed never reach here; the others (unbind, split, ...) are presented as TorchNeuron
    presents them."""
    from torch._decomp import get_decompositions
    return get_decompositions([
        aten.logsumexp, aten.squeeze.dims, aten.binary_cross_entropy, aten.native_batch_norm_backward, aten.nansum,
        aten.addr, aten.split, aten.split_with_sizes, aten.unbind, aten.replication_pad1d, aten.replication_pad2d,
        aten.replication_pad3d, aten.reflection_pad1d, aten.reflection_pad2d, aten.reflection_pad3d, aten.embedding,
        aten.native_layer_norm_backward, aten.nll_loss_backward, aten.clamp_min, aten.clamp_max, aten.linear_backward,
        aten._fused_rms_norm, aten._fused_rms_norm_backward, aten.fill.Scalar, aten.fill.Tensor, aten.index_add,
        aten.native_dropout_backward, aten.gelu_backward, aten.threshold_backward, aten._log_softmax_backward_data,
        aten._softmax_backward_data, aten.select_backward, aten.slice_backward, aten.softplus_backward,
        aten.index_select_backward, aten.col2im, aten.lerp, aten.elu, aten.elu_backward, aten.silu])


# The host-only ops of executed graphs, and how TorchNeuron presents their computation to the lowering.
LOWERING_DECOMPOSITIONS = {
    **_torchneuron_selection(),
    aten._scaled_dot_product_flash_attention_for_cpu.default: flash_attention_for_cpu,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default: flash_attention_for_cpu_backward,
    aten._scaled_dot_product_flash_attention.default: flash_attention,
    aten._scaled_dot_product_flash_attention_backward.default: flash_attention_backward,
    aten.histc.default: histc,
    aten.fmod.Scalar: fmod_scalar,
    aten.convolution_backward.default: convolution_backward,
    aten.topk.default: topk,
    aten.new_empty_strided.default: new_empty_strided,
    aten.index_put.default: index_put_with_mask,
    **_inductor_only_ops(),
}


# Ops TorchNeuron's graphs keep (its decompositions leave them) that Inductor decomposes into ops that lower:
# the executed graph only knows them as the `original_aten` of their pieces. torch-mlir does not lower them
# (tests/test_compile_lowering.py checks each alone), so a graph holding them fails as on Trainium.
KEPT_BY_TORCHNEURON_AND_NOT_LOWERED = {  # by name: the graph's `original_aten` need not be the same object
    "aten.max_pool2d_with_indices_backward.default",
    "aten.max_pool3d_with_indices_backward.default",
}
