"""Flash attention as NKI kernels (forward and backward), used by a Transformers Llama through torch_neuronx.nki_op.

    python examples/nki_flash_attention.py            # trains a tiny Llama a few steps with these kernels on
                                                      # neuron and with PyTorch's SDPA on CPU; the losses agree

The kernels are written for NKI 0.3+ (`import nki`, destination-first ISA calls) from the FlashAttention-2
algorithm: scores one [128 x 512] tile at a time on TensorE into PSUM, an online softmax (running max and sum
per row, rescaling the partial output), a causal mask with nisa.affine_select on the tiles that cross the
diagonal (tiles above it are skipped), grouped-query attention (each KV head serves `H // KVH` query heads),
and the log-sum-exp per row saved for the backward. The backward recomputes the probabilities from it and
accumulates dQ, dK and dV in SBUF.

Layouts: q [B, H, S, D], k and v [B, KVH, S, D] (what a Transformers attention function receives), D <= 128,
S a multiple of 128 (or at most 128).
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import torch

from torch_neuronx import nki_op

NEG = -3.0e38  # masked score: exp(NEG - m) is 0 in fp32


def _transposed(dst, src_sb, dtype):
    """dst[D, P] (SBUF) = src_sb[P, D]ᵀ through TensorE and PSUM."""
    t_ps = nl.ndarray((src_sb.shape[1], src_sb.shape[0]), dtype=dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=t_ps, data=src_sb)
    nisa.tensor_copy(dst=dst, src=t_ps)


@nki.jit
def flash_attention_fwd(q, k, v, scale, causal):
    """o = softmax(scale * q kᵀ (+ causal mask)) v and lse = log-sum-exp of each score row (fp32)."""
    B, H, S, D = q.shape
    KVH = k.shape[1]
    group = H // KVH
    P = min(nl.tile_size.pmax, S)
    n_blk = S // P
    KT = min(S, nl.tile_size.gemm_moving_fmax)
    o = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
    lse = nl.ndarray((B, H, S, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    for b in range(B):
        for kvh in range(KVH):
            kT = nl.ndarray((D, S), dtype=k.dtype, buffer=nl.sbuf)          # Kᵀ: contraction (D) on partitions
            v_sb = nl.ndarray((P, n_blk, D), dtype=v.dtype, buffer=nl.sbuf)  # V in key blocks of P rows
            for j in range(n_blk):
                k_blk = nl.ndarray((P, D), dtype=k.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=k_blk, src=k[b, kvh, j * P:(j + 1) * P, :])
                _transposed(kT[:, j * P:(j + 1) * P], k_blk, k.dtype)
                nisa.dma_copy(dst=v_sb[:, j, :], src=v[b, kvh, j * P:(j + 1) * P, :])
            for g in range(group):
                h = kvh * group + g
                for i in range(n_blk):
                    q_blk = nl.ndarray((P, D), dtype=q.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=q_blk, src=q[b, h, i * P:(i + 1) * P, :])
                    qT = nl.ndarray((D, P), dtype=q.dtype, buffer=nl.sbuf)
                    _transposed(qT, q_blk, q.dtype)
                    m = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                    l_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                    acc = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.memset(dst=m, value=NEG)
                    nisa.memset(dst=l_sum, value=0.0)
                    nisa.memset(dst=acc, value=0.0)
                    n_keys = (i + 1) * P if causal else S
                    for j0 in range(0, n_keys, KT):
                        w = min(KT, n_keys - j0)
                        s_ps = nl.ndarray((P, w), dtype=nl.float32, buffer=nl.psum)
                        nisa.nc_matmul(dst=s_ps, stationary=qT, moving=kT[:, j0:j0 + w])
                        s = nl.ndarray((P, w), dtype=nl.float32, buffer=nl.sbuf)
                        nisa.tensor_scalar(dst=s, data=s_ps, op0=nl.multiply, operand0=scale)
                        if causal and j0 + w > i * P:  # this tile crosses the diagonal: keep key <= query
                            nisa.affine_select(dst=s, pattern=[[-1, w]], channel_multiplier=1, on_true_tile=s,
                                               on_false_value=NEG, cmp_op=nl.greater_equal, offset=i * P - j0)
                        m_new = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                        nisa.tensor_reduce(dst=m_new, op=nl.maximum, data=s, axis=1)
                        nisa.tensor_tensor(dst=m_new, data1=m_new, data2=m, op=nl.maximum)
                        neg_m = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                        nisa.tensor_scalar(dst=neg_m, data=m_new, op0=nl.multiply, operand0=-1.0)
                        p = nl.ndarray((P, w), dtype=nl.float32, buffer=nl.sbuf)
                        row_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                        nisa.activation(dst=p, op=nl.exp, data=s, bias=neg_m, reduce_op=nl.add, reduce_res=row_sum,
                                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
                        alpha = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                        nisa.activation(dst=alpha, op=nl.exp, data=m, bias=neg_m)   # exp(m_old - m_new)
                        nisa.scalar_tensor_tensor(dst=l_sum, data=l_sum, op0=nl.multiply, operand0=alpha,
                                                  op1=nl.add, operand1=row_sum)
                        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=alpha)
                        pv_ps = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.psum)
                        for c in range(w // P):
                            pT = nl.ndarray((P, P), dtype=v.dtype, buffer=nl.sbuf)
                            _transposed(pT, p[:, c * P:(c + 1) * P], nl.float32)
                            nisa.nc_matmul(dst=pv_ps, stationary=pT, moving=v_sb[:, j0 // P + c, :])
                        nisa.tensor_tensor(dst=acc, data1=acc, data2=pv_ps, op=nl.add)
                        nisa.tensor_copy(dst=m, src=m_new)
                    inv_l = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.reciprocal(dst=inv_l, data=l_sum)
                    o_blk = nl.ndarray((P, D), dtype=o.dtype, buffer=nl.sbuf)
                    nisa.tensor_scalar(dst=o_blk, data=acc, op0=nl.multiply, operand0=inv_l)
                    nisa.dma_copy(dst=o[b, h, i * P:(i + 1) * P, :], src=o_blk)
                    lse_blk = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.activation(dst=lse_blk, op=nl.log, data=l_sum)
                    nisa.tensor_tensor(dst=lse_blk, data1=lse_blk, data2=m, op=nl.add)
                    nisa.dma_copy(dst=lse[b, h, i * P:(i + 1) * P, :], src=lse_blk)
    return o, lse


@nki.jit
def flash_attention_bwd(q, k, v, o, do, lse, scale, causal):
    """dq, dk, dv of flash_attention_fwd, from the saved lse (probabilities recomputed tile by tile)."""
    B, H, S, D = q.shape
    KVH = k.shape[1]
    group = H // KVH
    P = min(nl.tile_size.pmax, S)
    n_blk = S // P
    dq = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
    dk = nl.ndarray(k.shape, dtype=k.dtype, buffer=nl.shared_hbm)
    dv = nl.ndarray(v.shape, dtype=v.dtype, buffer=nl.shared_hbm)
    for b in range(B):
        for kvh in range(KVH):
            k_sb = nl.ndarray((P, n_blk, D), dtype=k.dtype, buffer=nl.sbuf)
            kT = nl.ndarray((D, S), dtype=k.dtype, buffer=nl.sbuf)
            vT = nl.ndarray((D, S), dtype=v.dtype, buffer=nl.sbuf)
            dk_acc = nl.ndarray((P, n_blk, D), dtype=nl.float32, buffer=nl.sbuf)
            dv_acc = nl.ndarray((P, n_blk, D), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=dk_acc, value=0.0)
            nisa.memset(dst=dv_acc, value=0.0)
            for j in range(n_blk):
                nisa.dma_copy(dst=k_sb[:, j, :], src=k[b, kvh, j * P:(j + 1) * P, :])
                _transposed(kT[:, j * P:(j + 1) * P], k_sb[:, j, :], k.dtype)
                v_blk = nl.ndarray((P, D), dtype=v.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=v_blk, src=v[b, kvh, j * P:(j + 1) * P, :])
                _transposed(vT[:, j * P:(j + 1) * P], v_blk, v.dtype)
            for g in range(group):
                h = kvh * group + g
                q_sb = nl.ndarray((P, n_blk, D), dtype=q.dtype, buffer=nl.sbuf)
                qT = nl.ndarray((D, S), dtype=q.dtype, buffer=nl.sbuf)
                do_sb = nl.ndarray((P, n_blk, D), dtype=do.dtype, buffer=nl.sbuf)
                doT = nl.ndarray((D, S), dtype=do.dtype, buffer=nl.sbuf)
                neg_lse = nl.ndarray((P, n_blk), dtype=nl.float32, buffer=nl.sbuf)
                d_row = nl.ndarray((P, n_blk), dtype=nl.float32, buffer=nl.sbuf)   # rowsum(dO * O)
                dq_acc = nl.ndarray((P, n_blk, D), dtype=nl.float32, buffer=nl.sbuf)
                nisa.memset(dst=dq_acc, value=0.0)
                for i in range(n_blk):
                    rows = slice(i * P, (i + 1) * P)
                    nisa.dma_copy(dst=q_sb[:, i, :], src=q[b, h, rows, :])
                    _transposed(qT[:, rows], q_sb[:, i, :], q.dtype)
                    nisa.dma_copy(dst=do_sb[:, i, :], src=do[b, h, rows, :])
                    _transposed(doT[:, rows], do_sb[:, i, :], do.dtype)
                    o_blk = nl.ndarray((P, D), dtype=o.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=o_blk, src=o[b, h, rows, :])
                    prod = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_tensor(dst=prod, data1=do_sb[:, i, :], data2=o_blk, op=nl.multiply)
                    nisa.tensor_reduce(dst=d_row[:, i:i + 1], op=nl.add, data=prod, axis=1)
                    lse_blk = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.dma_copy(dst=lse_blk, src=lse[b, h, rows, :])
                    nisa.tensor_scalar(dst=neg_lse[:, i:i + 1], data=lse_blk, op0=nl.multiply, operand0=-1.0)
                for j in range(n_blk):
                    for i in range(n_blk):
                        if causal and j > i:
                            continue  # keys after every query of this block
                        s_ps = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.psum)
                        nisa.nc_matmul(dst=s_ps, stationary=qT[:, i * P:(i + 1) * P], moving=kT[:, j * P:(j + 1) * P])
                        p = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)   # exp(scale * s - lse)
                        nisa.activation(dst=p, op=nl.exp, data=s_ps, scale=scale, bias=neg_lse[:, i:i + 1])
                        if causal and i == j:
                            nisa.affine_select(dst=p, pattern=[[-1, P]], channel_multiplier=1, on_true_tile=p,
                                               on_false_value=0.0, cmp_op=nl.greater_equal, offset=0)
                        p_mm = nl.ndarray((P, P), dtype=do.dtype, buffer=nl.sbuf)
                        nisa.tensor_copy(dst=p_mm, src=p)
                        dv_ps = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.psum)       # Pᵀ dO
                        nisa.nc_matmul(dst=dv_ps, stationary=p_mm, moving=do_sb[:, i, :])
                        nisa.tensor_tensor(dst=dv_acc[:, j, :], data1=dv_acc[:, j, :], data2=dv_ps, op=nl.add)
                        dp_ps = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.psum)       # dO Vᵀ
                        nisa.nc_matmul(dst=dp_ps, stationary=doT[:, i * P:(i + 1) * P], moving=vT[:, j * P:(j + 1) * P])
                        ds = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)          # P (dP - D) scale
                        nisa.tensor_scalar(dst=ds, data=dp_ps, op0=nl.subtract, operand0=d_row[:, i:i + 1],
                                           op1=nl.multiply, operand1=scale)
                        nisa.tensor_tensor(dst=ds, data1=ds, data2=p, op=nl.multiply)
                        ds_mm = nl.ndarray((P, P), dtype=q.dtype, buffer=nl.sbuf)
                        nisa.tensor_copy(dst=ds_mm, src=ds)
                        dk_ps = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.psum)       # dSᵀ Q
                        nisa.nc_matmul(dst=dk_ps, stationary=ds_mm, moving=q_sb[:, i, :])
                        nisa.tensor_tensor(dst=dk_acc[:, j, :], data1=dk_acc[:, j, :], data2=dk_ps, op=nl.add)
                        dsT = nl.ndarray((P, P), dtype=k.dtype, buffer=nl.sbuf)
                        _transposed(dsT, ds_mm, q.dtype)
                        dq_ps = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.psum)       # dS K
                        nisa.nc_matmul(dst=dq_ps, stationary=dsT, moving=k_sb[:, j, :])
                        nisa.tensor_tensor(dst=dq_acc[:, i, :], data1=dq_acc[:, i, :], data2=dq_ps, op=nl.add)
                for i in range(n_blk):
                    dq_blk = nl.ndarray((P, D), dtype=dq.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=dq_blk, src=dq_acc[:, i, :])
                    nisa.dma_copy(dst=dq[b, h, i * P:(i + 1) * P, :], src=dq_blk)
            for j in range(n_blk):
                for acc, out in ((dk_acc, dk), (dv_acc, dv)):
                    blk = nl.ndarray((P, D), dtype=out.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=blk, src=acc[:, j, :])
                    nisa.dma_copy(dst=out[b, kvh, j * P:(j + 1) * P, :], src=blk)
    return dq, dk, dv


# -- PyTorch: a differentiable op ---------------------------------------------------------------------------

@nki_op("nki_examples::flash_attention", mutates_args=())
def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                    causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return flash_attention_fwd(q, k, v, scale, causal)


@nki_op("nki_examples::flash_attention_backward", mutates_args=())
def flash_attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                             do: torch.Tensor, scale: float, causal: bool
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return flash_attention_bwd(q, k, v, o, do.contiguous(), lse, scale, causal)


def _setup_context(ctx, inputs, output):
    q, k, v, scale, causal = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.scale, ctx.causal = scale, causal
    ctx.mark_non_differentiable(lse)


def _backward(ctx, do, dlse):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = flash_attention_backward(q, k, v, o, lse, do, ctx.scale, ctx.causal)
    return dq, dk, dv, None, None


flash_attention.register_autograd(_backward, setup_context=_setup_context)


# -- Transformers: an attention implementation ---------------------------------------------------------------

ATTN_IMPLEMENTATION = "nki_sdpa"  # (a name with "flash" in it would send Transformers to its kernel hub)


def nki_attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                          is_causal=None, **kwargs):
    """A Transformers attention function (AttentionInterface) computing with the NKI kernels above."""
    if attention_mask is not None:
        raise NotImplementedError(f"{ATTN_IMPLEMENTATION}: padding / custom attention masks are not supported by "
                                  "these kernels; pass unpadded batches (attention_mask=None) or use 'sdpa'")
    if dropout:
        raise NotImplementedError(f"{ATTN_IMPLEMENTATION}: attention dropout is not supported (set attention_dropout=0)")
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    o, _ = flash_attention(query.contiguous(), key.contiguous(), value.contiguous(), float(scale),
                           bool(causal and query.shape[2] > 1))
    return o.transpose(1, 2).contiguous(), None


def register_attention() -> str:
    """Make `attn_implementation="nki_sdpa"` available to Transformers models; returns the name."""
    from transformers import AttentionInterface
    AttentionInterface.register(ATTN_IMPLEMENTATION, nki_attention_forward)
    return ATTN_IMPLEMENTATION


# -- the example ---------------------------------------------------------------------------------------------

def train_losses(device: str, attn_implementation: str, steps: int = 3, seq: int = 256, seed: int = 0,
                 compile: bool = False) -> list[float]:
    """Losses of a tiny Llama trained `steps` AdamW steps on fixed random tokens."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      attn_implementation=attn_implementation)
    model = LlamaForCausalLM(cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, cfg.vocab_size, (2, seq), generator=g).to(device)
    step = (lambda i: model(input_ids=i, labels=i).loss)
    if compile:
        step = torch.compile(step, backend="neuron", fullgraph=True)
    losses = []
    for _ in range(steps):
        loss = step(ids)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def main() -> None:
    register_attention()
    ref = train_losses("cpu", "sdpa")
    got = train_losses("neuron", ATTN_IMPLEMENTATION)
    print("CPU SDPA        ", ["%.6f" % x for x in ref])
    print("neuron NKI flash", ["%.6f" % x for x in got])
    assert all(abs(a - b) <= 1e-4 * max(1.0, abs(a)) for a, b in zip(ref, got)), "losses differ"
    import torch_neuronx.nki as tnki
    for stats in tnki.statistics().values():
        print(stats)


if __name__ == "__main__":
    main()
