"""The attention kernel a training step runs on Trainium, as a cost: the flash-attention algorithm, never an S x S
score matrix in HBM.

scaled_dot_product_attention on neuron takes the fused flash kernel (TorchNeuron runs an NKI flash-attention
kernel; the emulator the host's `_scaled_dot_product_flash_attention_for_cpu`, csrc/aten/RegisterNeuron.cpp), so a
traced step holds its q, k, v, output and log-sum-exp, no score matrix: the memory plan is the kernel's. Its time:

  TensorE    forward QK^T and PV: 4 b h sq sk d FLOPs; backward recomputes QK^T and forms dV, dP, dQ, dK: 10 b h sq
             sk d (the standard flash-attention backward, 2.5x the forward). With a causal mask the kernel skips the
             key tiles wholly above the diagonal: with 128-row tiles a fraction (n + 1) / 2n of the scores is computed
             (n = sq / 128).
  ScalarE    exp of every computed score (and its row sum, accumulated by the same instruction): 1 pass forward,
             1 pass backward (P recomputed from the saved log-sum-exp).
  VectorE    the running row max: 1 pass forward; backward dS = P * (dP - D): a tensor-scalar pass and a two-input
             pass (2N cycles: NKI architecture guide's VectorE cost model), 3 passes; an explicit attention mask adds
             a two-input pass each way.
  HBM        q, k, v, output, log-sum-exp (and dO, dq, dk, dv backward): the op's inputs and outputs.

The engines run concurrently, software-pipelined across query tiles (the shipped NKI prefill kernel "attention_cte"
overlaps one tile's softmax with the next tile's matmul: vllm-neuron docs, optimizing-vlm-models.md), so the
kernel's time is the busiest engine's (estimate.py).
"""

from __future__ import annotations

from dataclasses import dataclass

TILE = 128               # query rows per kernel tile (TensorE's 128 partitions)
FORWARD_PASSES = (1, 1)  # (VectorE, ScalarE) passes over the computed scores
BACKWARD_PASSES = (3, 1)
MASK_PASSES = 2          # an explicit additive mask: one two-input VectorE pass

_KERNELS = {"_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
            "_scaled_dot_product_flash_attention_for_cpu_backward", "_scaled_dot_product_flash_attention_backward",
            "_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_cudnn_attention_backward"}


@dataclass(frozen=True, slots=True)
class Call:
    backward: bool
    batch: int
    heads: int           # query heads (key/value heads may be fewer: GQA)
    q_len: int
    k_len: int
    head_dim: int
    causal: bool
    masked: bool         # an explicit attention mask is read

    @property
    def computed_fraction(self) -> float:
        """Fraction of the sq x sk scores the kernel computes (causal: the tiles on and below the diagonal)."""
        if not self.causal:
            return 1.0
        n = max(1, -(-self.q_len // TILE))
        return (n + 1) / (2 * n)

    @property
    def scores(self) -> float:
        return self.batch * self.heads * self.q_len * self.k_len * self.computed_fraction

    @property
    def flops(self) -> float:
        return (10 if self.backward else 4) * self.scores * self.head_dim

    @property
    def vector_passes(self) -> float:
        v = (BACKWARD_PASSES if self.backward else FORWARD_PASSES)[0]
        return v + (MASK_PASSES if self.masked else 0)

    @property
    def scalar_passes(self) -> float:
        return (BACKWARD_PASSES if self.backward else FORWARD_PASSES)[1]


def parse(func, args, kwargs) -> Call | None:
    """The attention call FUNC(ARGS, KWARGS) makes, or None if FUNC is not an attention kernel."""
    if func._opname not in _KERNELS:
        return None
    names = [a.name for a in func._schema.arguments]
    bound = dict(zip(names, args))
    bound.update(kwargs)
    backward = "grad_out" in bound or "grad_out_" in bound
    q, k = bound["query"], bound["key"]
    mask = bound.get("attn_mask", bound.get("attn_bias"))
    b, h, sq, d = q.shape[-4:] if q.dim() == 4 else (1, *q.shape[-3:])
    return Call(backward=backward, batch=int(b), heads=int(h), q_len=int(sq), k_len=int(k.shape[-2]),
                head_dim=int(d), causal=bool(bound.get("is_causal", False)), masked=mask is not None)
