"""AWS's published Trainium training throughput, the configurations behind each figure, and how far the plan's
estimates are from them: the error band a plan prints next to its estimate.

Source: the Neuron SDK documentation's trn1 training performance pages (aws-neuron/aws-neuron-sdk,
about-neuron/benchmarks/trn1/training_data_decoder.csv and, in older releases, general/benchmarks/trn1/*.csv; the
commit of each figure is given). AWS reports sequences/s; tokens/s = sequences/s x sequence length. Micro-batch 1,
AdamW throughout; "selective" is NeuronX Distributed's selective activation checkpointing (core attention
recomputed) with sequence parallelism.

TABLE is the shared table the model is checked against (AWS's published trn1 training figures, each row with
its source file and commit); HELD_OUT are
other figures from the same pages, kept apart and never used to set anything in the model; rows with pipeline
parallelism cannot be expressed by a TP x FSDP plan yet (`torchneuron plan` has no --pp).

RATIOS holds estimated / published tokens/s per expressible row as bench/plan_accuracy.py --published last measured
them (the bench prints the current ones next to these); `band()` is their range over TABLE.
"""

from __future__ import annotations

from dataclasses import dataclass

# GPT-3 6.7B (Brown et al. 2020, Table 2.1: 32 layers, d_model 4096, 32 heads of 128, d_ff = 4 d_model, GPT-2's
# 50257-token vocabulary, 2048 context) in the Transformers architecture with its shape and a tensor-parallel plan:
# GPT-NeoX with sequential residuals (GPT-3's), LayerNorm, GeLU, no dropout (what the plan's step runs).
GPT3_6_7B = dict(model_type="gpt_neox", hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                 intermediate_size=16384, vocab_size=50257, max_position_embeddings=2048, use_parallel_residual=False,
                 hidden_act="gelu", rotary_pct=1.0, attention_dropout=0.0, hidden_dropout=0.0,
                 tie_word_embeddings=False, _source="GPT-3 6.7B (Brown et al. 2020, Table 2.1) as a GPT-NeoX config")

# AWS's Megatron-LM reference (SDK 2.6 tutorial, frameworks/torch/torch-neuronx/tutorials/training/megatron_lm_gpt.rst
# @ 7119ba39): TP 8 x DP 4 per instance, micro-batch 1, dropout disabled, "No CUDA fusions (bias-gelu,
# masked-softmax, bias-dropout)": Megatron's attention as two matmuls around a softmax, the scores in HBM. Its script
# (aws-neuron-reference-for-megatron-lm examples/pretrain_gpt3_6.7B_32layers_bf16.sh @ f55a525, the SDK 2.6 state):
# XLA_USE_BF16=1 with stochastic rounding (BF16 parameters, gradients and optimizer state, as the plan's bf16), no
# activation checkpointing, no sequence parallelism, local DDP (one gradient all-reduce per step, optimizer state
# not sharded), --clip-grad 1, no NEURON_FUSE_SOFTMAX (added in SDK 2.11). docs/plan.md, "GPT3-6.7B with SDK 2.6",
# weighs each against the plan's step: none explains the one-instance row's 1.43.
MEGATRON = "AWS's Megatron-LM reference: unfused attention (scores materialised), dropout off"

DECODER_CSV = "about-neuron/benchmarks/trn1/training_data_decoder.csv"
OLD_DECODER_CSV = "general/benchmarks/trn1/training_data_decoder.csv"
OLD_NLP_CSV = "general/benchmarks/trn1/trn1_trn1n_nlp_data.csv"


@dataclass(frozen=True)
class Published:
    id: str
    model: str | dict            # a plan preset, or a config dict
    name: str
    nodes: int                   # trn1.32xlarge instances
    tp: int
    pp: int
    dp: int
    seq: int
    global_batch: int
    checkpointing: str           # AWS's run: none / selective
    precision: str
    sequences_per_second: float
    sdk: str
    source: str                  # file @ commit of the docs repository
    note: str = ""
    instance: str = "trn1.32xlarge"
    attention: str = "sdpa"      # the attention the run computed: the fused flash kernel, or eager (scores in HBM)

    @property
    def tokens_per_second(self) -> float:
        return self.sequences_per_second * self.seq

    @property
    def expressible(self) -> bool:
        """A TP x FSDP plan can express it (no pipeline parallelism)."""
        return self.pp == 1


TABLE = (
    Published("llama2-7b@2.21", "llama-2-7b", "Llama-2-7B", 16, 8, 1, 64, 4096, 1024, "selective", "BF16+FP32Opt",
              95.14, "2.21", f"{OLD_DECODER_CSV} @ 752349fd"),
    Published("llama2-7b@2.20", "llama-2-7b", "Llama-2-7B", 16, 8, 1, 64, 4096, 1024, "selective", "BF16+FP32Opt",
              101.3, "2.20", f"{OLD_DECODER_CSV} @ 5ccac8f3"),
    Published("llama2-7b@2.18", "llama-2-7b", "Llama-2-7B", 16, 8, 1, 64, 4096, 1024, "selective", "BF16+FP32Opt",
              92.93, "2.18", f"{OLD_DECODER_CSV} @ 8907253c"),
    Published("gpt3-6.7b@2.6", GPT3_6_7B, "GPT3-6.7B", 1, 8, 1, 4, 2048, 64, "none", "BF16+SR", 8.23, "2.6",
              "general/benchmarks/trn1/nlp_data.csv @ 7119ba39", MEGATRON, attention="eager"),
)

HELD_OUT = (
    Published("llama3.1-8b@2.24", dict(_preset="llama-3.1-8b", num_key_value_heads=32), "Llama-3.1-8B", 32, 32, 1,
              32, 8192, 1024, "selective", "BF16+FP32Opt", 47.95, "2.24", f"{DECODER_CSV} @ 1db4d74e",
              "8 key/value heads replicated to the TP degree, as NeuronX Distributed does for TP 32 (its "
              "kv_size_multiplier): planned with 32 key/value heads"),
    Published("gpt3-6.7b-16n@2.13", GPT3_6_7B, "GPT3-6.7B", 16, 8, 1, 64, 2048, 1024, "none", "BF16+SR", 143.75,
              "2.13", f"{OLD_NLP_CSV} @ f25691d3", MEGATRON, attention="eager"),
    Published("gpt3-6.7b-16n@2.6", GPT3_6_7B, "GPT3-6.7B", 16, 8, 1, 64, 2048, 1024, "none", "BF16+SR", 122.13, "2.6",
              "general/benchmarks/trn1/nlp_data.csv @ 7119ba39", MEGATRON, attention="eager"),
    Published("llama2-7b@2.15", "llama-2-7b", "Llama-2-7B", 16, 8, 1, 64, 4096, 1024, "selective", "BF16+FP32Opt",
              81.0, "2.15", f"{OLD_NLP_CSV} @ 90a7fe4b", "the table's configuration in an older release (MFU 30.8%)"),
)

NOT_EXPRESSIBLE = (
    Published("llama2-13b@2.21", "", "Llama-2-13B", 32, 8, 8, 16, 4096, 1024, "selective", "BF16+FP32Opt", 80.33,
              "2.21", f"{OLD_DECODER_CSV} @ 752349fd"),
    Published("llama2-70b@2.21", "", "Llama-2-70B", 32, 32, 8, 4, 4096, 1024, "selective", "BF16+FP32Opt", 14.44,
              "2.21", f"{OLD_DECODER_CSV} @ 752349fd"),
    Published("llama3.1-70b@2.24", "", "Llama-3.1-70B", 32, 32, 8, 4, 8192, 1024, "selective", "BF16+FP32Opt", 7.94,
              "2.24", f"{DECODER_CSV} @ 1db4d74e"),
    Published("gpt3-23b@2.18", "", "GPT3-23B", 32, 8, 4, 32, 2048, 1024, "none", "BF16+SR", 107.18, "2.18",
              f"{OLD_DECODER_CSV} @ 8907253c"),
    Published("gpt3-46b@2.18", "", "GPT3-46B", 32, 8, 8, 16, 2048, 1024, "none", "BF16+SR", 48.24, "2.18",
              f"{OLD_DECODER_CSV} @ 8907253c"),
    Published("gpt3-175b@2.18", "", "GPT3-175B", 32, 32, 8, 4, 2048, 1024, "none", "BF16+SR", 14.60, "2.18",
              f"{OLD_DECODER_CSV} @ 8907253c"),
)

# estimated / published tokens/s, as bench/plan_accuracy.py --published measured them on 2026-12-05 (docs/plan.md).
RATIOS: dict[str, float] = {
    "llama2-7b@2.21": 1.044, "llama2-7b@2.20": 0.981, "llama2-7b@2.18": 1.069, "gpt3-6.7b@2.6": 1.433,
    # held out
    "llama3.1-8b@2.24": 0.767, "gpt3-6.7b-16n@2.13": 0.939, "gpt3-6.7b-16n@2.6": 1.106, "llama2-7b@2.15": 1.226,
}


def band(chip: str = "Trainium1") -> tuple[tuple[float, float] | None, str]:
    """(lowest, highest) estimated / published ratio over TABLE, and where it comes from; None before a measurement."""
    ratios = [RATIOS[r.id] for r in TABLE if r.id in RATIOS]
    if not ratios:
        return None, "no published-figure comparison recorded"
    source = f"estimate / AWS-measured tokens/s on {len(ratios)} published trn1 runs (docs/plan.md)"
    if chip != "Trainium1":
        source += f"; AWS publishes no {chip} training figures, so this band is Trainium1's"
    return (min(ratios), max(ratios)), source


def model_argument(row: Published, folder: str) -> str:
    """What to pass plan() as its model for ROW: a preset name, or a config.json written to FOLDER."""
    import json
    import os

    from .config import load_config_dict

    if isinstance(row.model, str):
        return row.model
    data = dict(row.model)
    preset = data.pop("_preset", None)
    if preset:
        base, _ = load_config_dict(preset)
        data = {**base, **data}
    path = os.path.join(folder, f"{row.id}.json")
    with open(path, "w") as f:
        json.dump(data, f)
    return path
