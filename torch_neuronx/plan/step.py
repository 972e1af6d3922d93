"""The training step a plan models, and that bench/plan_accuracy.py runs for real: one code path for both.

Per rank, in a process group of world size tp * fsdp:
  * the Transformers model built from the config on the rank's neuron core (under FakeTensorMode every tensor
    is fake: no memory behind it), then sharded by Transformers' own
    `from_pretrained(distributed_config=DistributedConfig(tp_size, fsdp_size))` code (`prepare_distribute_model`
    makes the (pp, dp_replicate, fsdp, tp) mesh, `maybe_distribute_model` applies its TP plan and FSDP2
    `fully_shard`). from_pretrained does that on the meta device and then loads each rank's shard; the sharded
    parameters a step starts from are the same;
  * parameters in the chosen dtype (bf16: pure bf16 training, as `from_pretrained(dtype=torch.bfloat16)`; fp32),
    attention as Transformers' "sdpa" (scaled_dot_product_attention: the fused flash kernel on neuron, the default)
    or "eager" (the scores materialised, softmax, a second matmul), and optionally activation checkpointing:
    "full" is Transformers' gradient checkpointing (each decoder layer recomputed in backward), "selective"
    recomputes only the attention kernel (what AWS's NeuronX Distributed runs call selective checkpointing: the
    core attention recomputed, the rest of the layer's activations kept), as a user gets it with Transformers'
    public AttentionInterface (an attention function wrapped in torch.utils.checkpoint);
  * the step: causal-LM loss on a [batch, seq] micro-batch (labels = inputs), backward, optimizer step
    (torch.optim.AdamW or SGD with its defaults), zero_grad(set_to_none=True).
The measured step is a steady-state one: the optimizer state already exists (it is created by a first step).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
OPTIMIZERS = ("adamw", "sgd")
CHECKPOINTING = ("none", "full", "selective")
ATTENTION = ("sdpa", "eager")
SELECTIVE_ATTENTION = "sdpa_recomputed"   # the attention implementation name "selective" registers


@dataclass(frozen=True)
class StepSpec:
    """What one training step is, apart from the model: layout, batch and numerics."""
    tp: int = 1
    fsdp: int = 1
    seq: int = 2048
    batch: int = 1
    dtype: str = "bf16"
    optimizer: str = "adamw"
    activation_checkpointing: str = "none"   # none / full / selective (True / False: full / none)
    global_batch: int | None = None          # sequences per optimizer step over the job (None: batch x fsdp)
    attention: str = "sdpa"                  # Transformers' attn_implementation: sdpa (the fused kernel) or eager

    def __post_init__(self):
        if isinstance(self.activation_checkpointing, bool) or self.activation_checkpointing is None:
            object.__setattr__(self, "activation_checkpointing", "full" if self.activation_checkpointing else "none")

    @property
    def world(self) -> int:
        return self.tp * self.fsdp

    @property
    def accumulation(self) -> int:
        """Micro-batches per optimizer step (gradient accumulation)."""
        return self.global_batch // (self.batch * self.fsdp) if self.global_batch else 1


def make_mesh(spec: StepSpec):
    """Transformers' mesh for this layout, as from_pretrained(distributed_config=...) makes it (None for one rank).
    The process group must exist; call it outside FakeTensorMode (a DeviceMesh holds a real tensor of ranks)."""
    from transformers import PreTrainedModel
    from transformers.distributed import DistributedConfig

    if spec.world == 1:
        return None
    return PreTrainedModel.prepare_distribute_model(DistributedConfig(tp_size=spec.tp, fsdp_size=spec.fsdp), None)


def create_model(config, spec: StepSpec, device: torch.device):
    """The model of CONFIG on DEVICE, whole, as Transformers initializes it (under FakeTensorMode: fake), its
    weights not tied yet: from_pretrained builds the model under Transformers' `no_tie_weights()`, distributes it,
    and ties the weights (tie_word_embeddings) after (distribute() does). Tied before, Transformers' TP plan names
    `lm_head.weight`, a parameter a tied model no longer lists, and apply_tensor_parallelism raises KeyError."""
    from transformers import AutoModelForCausalLM
    from transformers.initialization import no_tie_weights

    with torch.device(device), no_tie_weights():
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[spec.dtype], attn_implementation=spec.attention)
    model.train()
    return model


def distribute(model, spec: StepSpec, mesh):
    """Shard MODEL as from_pretrained(distributed_config=...) does over MESH (make_mesh's result): Transformers' TP
    plan, then FSDP2 fully_shard per its FSDP plan, then the tied weights tied; then activation checkpointing if
    asked. Run it outside
    FakeTensorMode: the sharding builds DeviceMeshes (real rank tensors); fake parameters stay fake."""
    if mesh is not None:
        dist_config, _, mesh_manager = mesh
        model = type(model).maybe_distribute_model(model, dist_config, mesh_manager)
    model.tie_weights(recompute_mapping=False)  # as from_pretrained's _finalize_model_loading, after sharding
    if spec.activation_checkpointing == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    elif spec.activation_checkpointing == "selective":
        _register_selective_attention()
        model.set_attn_implementation(SELECTIVE_ATTENTION)
    return model


def _recomputed_sdpa(module, query, key, value, attention_mask, **kwargs):
    """Transformers' SDPA attention, its kernel recomputed in backward instead of keeping its output."""
    from torch.utils.checkpoint import checkpoint
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    return checkpoint(sdpa_attention_forward, module, query, key, value, attention_mask, use_reentrant=False,
                      **kwargs)


def _register_selective_attention() -> None:
    from transformers import AttentionInterface
    AttentionInterface.register(SELECTIVE_ATTENTION, _recomputed_sdpa)


def build_model(config, spec: StepSpec, device: torch.device, mesh=None):
    """create_model then distribute: the model a rank trains."""
    return distribute(create_model(config, spec, device), spec, mesh)


def make_optimizer(model, spec: StepSpec, foreach: bool | None = None) -> torch.optim.Optimizer:
    """The optimizer over all parameters, with torch's defaults (foreach where torch chooses it; the trace passes
    the choice torch makes for the real parameters, see trace.py)."""
    if spec.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=foreach)
    if spec.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=foreach)
    raise ValueError(f"optimizer {spec.optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")


def make_batch(config, spec: StepSpec, device: torch.device) -> torch.Tensor:
    """One rank's micro-batch of token ids [batch, seq] (every TP rank of a group gets the same one)."""
    vocab = config.get_text_config().vocab_size
    return torch.randint(0, vocab, (spec.batch, spec.seq), device=device)


def train_step(model, optimizer, input_ids: torch.Tensor) -> torch.Tensor:
    """forward with the causal-LM loss, backward, optimizer step, gradients freed."""
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()
