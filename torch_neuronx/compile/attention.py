"""scaled_dot_product_attention traced on neuron picks the same fused kernel as on the host.

F.scaled_dot_product_attention is a composite op: while tracing, ATen picks a
backend for the device (`_fused_sdp_choice_stub`, a per-device-type C++
table) and decomposes into that backend's op. The table has no entry for
PrivateUse1, so on neuron the trace decomposes into the unfused "math"
attention (bmm, softmax, bmm and their backward), while the same model traced
on CPU gets `_scaled_dot_product_flash_attention_for_cpu`. Neuron graphs
become host kernels, so they should make the host's choice.

This registers a Python kernel for the AutogradPrivateUse1 key of
aten::scaled_dot_product_attention. Python kernels only run under the Python
dispatcher, which AOTAutograd enables while it traces; eager neuron execution
is unaffected. The kernel asks the host's own chooser, on stand-in CPU
tensors with the same sizes, dtypes and last-dimension stride (what the
chooser inspects) but no memory, and emits the op it picks. When the caller allows only the OVERRIDEABLE
backend (`sdpa_kernel(SDPBackend.OVERRIDEABLE)`, TorchNeuron's own), the neuron chooser picks it for 4-D
inputs (csrc/aten/native/WithoutCpuKernel.cpp), and its kernel without dropout is the host's flash kernel:
that one is emitted. (Dropout in a compiled graph never reaches here: random_ops.py legalizes it first.)
"""

from __future__ import annotations

import torch
from torch._C import DispatchKey

from .decompositions import repeat_kv_heads

aten = torch.ops.aten
_FLASH = 1  # sdp::SDPBackend::flash_attention


def _stand_in(x: torch.Tensor | None) -> torch.Tensor | None:
    """A real CPU tensor with x's sizes and dtype, whose memory is one row (zero leading strides)."""
    if x is None:
        return None
    last = 1 if x.dim() == 0 or x.stride(-1) == 1 else 2
    row = torch.empty(max(x.shape[-1], 1) * last if x.dim() else 1, dtype=x.dtype)
    view = row.as_strided(x.shape, (0,) * max(x.dim() - 1, 0) + ((last,) if x.dim() else ()))
    return view.requires_grad_(x.requires_grad) if x.is_floating_point() else view


def host_choice(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> int:
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():  # real CPU tensors: outside fake/functional/proxy tracing modes
        return torch._fused_sdp_choice(_stand_in(q), _stand_in(k), _stand_in(v), _stand_in(attn_mask), dropout_p,
                                       is_causal, scale=scale, enable_gqa=enable_gqa)


def only_overrideable(q, k, v) -> bool:
    """The neuron chooser's OVERRIDEABLE case: the only backend the caller allows, 4-D inputs."""
    return (torch._C._get_overrideable_sdp_enabled() and not torch._C._get_flash_sdp_enabled()
            and not torch._C._get_math_sdp_enabled() and q.dim() == k.dim() == v.dim() == 4)


def _neuron_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        # As ATen does before choosing: a boolean mask becomes an additive one (0 keeps, -inf masks).
        keep = torch.scalar_tensor(0.0, dtype=q.dtype, device=q.device)
        drop = torch.scalar_tensor(float("-inf"), dtype=q.dtype, device=q.device)
        attn_mask = torch.where(attn_mask, keep, drop)
    overrideable = only_overrideable(q, k, v)
    if overrideable and enable_gqa:  # as the OVERRIDEABLE kernel repeats heads
        k, v = repeat_kv_heads(k, q), repeat_kv_heads(v, q)
    if (overrideable and dropout_p == 0.0) or \
            host_choice(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa) == _FLASH:
        return aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, attn_mask=attn_mask,
                                                                scale=scale)[0]
    return aten.scaled_dot_product_attention.default.decompose(q, k, v, attn_mask, dropout_p, is_causal,
                                                               scale=scale, enable_gqa=enable_gqa)


_registered = False


def register() -> None:
    global _registered
    if not _registered:
        aten.scaled_dot_product_attention.default.py_impl(DispatchKey.AutogradPrivateUse1)(_neuron_sdpa)
        _registered = True
