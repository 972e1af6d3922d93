"""Which architectures the matrix covers, and how to build a tiny random model of each.

The list is Transformers' own causal-LM mapping, so a new Transformers release
grows the matrix without a change here. A tiny model is the architecture's
default config with its sizes shrunk: the same code paths run (attention
variants, MoE routing, sliding windows, hybrid/recurrent blocks), but a forward
takes milliseconds. Shrinking is generic (set every size attribute the config
has, recurse into nested sub-configs); `ARCH_OVERRIDES` holds the few
per-architecture values that the generic pass cannot infer (per-layer pattern
strings, sizes that must divide each other, ...).
"""

from __future__ import annotations

import torch

# Sizes of the tiny text model. hidden 64 with 4 heads of 16 keeps every
# "divides by heads / by 2 for rotary / by groups" rule satisfied; vocab 128 is
# small but leaves room above the special tokens.
VOCAB = 128
TEXT_SIZES: dict[str, object] = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 128,
    "ffn_hidden_size": 128,
    "num_hidden_layers": 2,
    "num_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_kv_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 128,
    "max_seq_len": 128,
    "n_positions": 128,
    "rotary_dim": 8,
    # encoder-decoder families whose decoder is the causal LM (BART, Whisper, ...)
    "encoder_layers": 2,
    "decoder_layers": 2,
    "num_encoder_layers": 2,
    "num_decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "num_encoder_attention_heads": 4,
    "num_decoder_attention_heads": 4,
    "encoder_ffn_dim": 128,
    "decoder_ffn_dim": 128,
    # MoE: few small experts, still routed top-2 (with shared experts where the
    # architecture has them)
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "moe_num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_topk": 2,
    "top_k": 2,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "n_shared_experts": 1,
    "num_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    # multi-head latent attention (DeepSeek-style)
    "kv_lora_rank": 16,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 16,
    # sliding window smaller than prompt + generated tokens, so it takes effect
    "sliding_window": 16,
    # state-space / linear-attention blocks
    "mamba_d_state": 16,
    "mamba_n_heads": 8,
    "mamba_d_head": 16,
    "mamba_n_groups": 1,
    "state_size": 16,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    # weights stay float32 whatever the checkpoint's default dtype
    "dtype": "float32",
    "use_cache": True,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}

# Vision / audio / other towers of composite models: built (the model class
# owns them) but not run by a text-only prompt, so only their size matters.
TOWER_SIZES: dict[str, object] = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_layers": 1,
    "depth": 1,
    "num_attention_heads": 2,
    "num_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "image_size": 32,
    "patch_size": 8,
    "vocab_size": VOCAB,
    "dtype": "float32",
}

# Sub-config names of towers that a text prompt does not run.
TOWER_WORDS = ("vision", "audio", "image", "vq", "speech", "video", "encoder", "patcher", "perceiver", "projector")

# Names under which composite configs nest the language model.
TEXT_SUBCONFIG_NAMES = ("text_config", "decoder", "generator", "language_config", "llm_config", "text_decoder")

# Per-architecture values the generic pass cannot infer, applied last (to the
# text config for composite models). Each entry says why.
ARCH_OVERRIDES: dict[str, dict[str, object]] = {
    # one global + one local layer (the default pattern is sized for 24 layers)
    "gpt_neo": {"attention_types": [[["global", "local"], 1]], "window_size": 16},
    # SSM heads must tile hidden_size * expand = 128
    "mamba2": {"num_heads": 8, "head_dim": 16, "n_groups": 1, "chunk_size": 16},
    "falcon_h1": {"mamba_d_ssm": 128, "mamba_n_heads": 8, "mamba_d_head": 16, "mamba_chunk_size": 16},
    "xlnet": {"d_head": 16},
    # per-layer-type rope parameters (the default config has none for its own layer type)
    "cohere_compass_text": {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
    # axial position factors must multiply to the (padded) sequence length and sum to hidden_size
    "reformer": {"axial_pos_shape": [4, 8], "axial_pos_embds_dim": [32, 32], "attn_layers": ["local", "lsh"],
                 "local_attn_chunk_length": 8, "lsh_attn_chunk_length": 8, "num_buckets": 2,
                 "attention_head_size": 16, "feed_forward_size": 128},
    # X-MOD routes through per-language adapters: name the language
    "xmod": {"default_language": "en_XX"},
    # DBRX's attention reads rope_theta from attn_config, which its default config lacks (checkpoints have it)
    "dbrx": {"attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0}},
    # KV sharing between the last layers: with 2 layers there is none to share
    "gemma3n_text": {"num_kv_shared_layers": 0},
    "gemma3n": {"num_kv_shared_layers": 0},
    "gemma4_unified_assistant": {"num_kv_shared_layers": 0},
    "xlstm": {"num_heads": 4},
    # ZAYA routes each token to one expert only
    "zaya": {"num_experts_per_tok": 1},
    # hybrids whose default attention layers sit past layer 2: one SSM/linear layer, then one attention layer
    "bamba": {"mamba_chunk_size": 16, "attn_layer_indices": [1]},
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2, "expert_layer_offset": 1},
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
    # the shared transformer block is tied across hybrid layers: it needs two of them
    "zamba": {"layers_block_type": ["linear_attention", "hybrid", "hybrid"], "num_hidden_layers": 3},
    # query-sparse attention indexer (the default leaves it unset)
    "qwen4_exp": {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 8,
                  "indexer_compress_ratio": 4},
    "qwen4_exp_text": {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 8,
                       "indexer_compress_ratio": 4},
}


def causal_lm_architectures() -> dict[str, str]:
    """model_type -> model class name, as in Transformers' causal-LM auto mapping."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    return dict(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def _fields(cfg_cls) -> set[str]:
    """Settable keys of a config class: its dataclass fields and the aliases of its attribute_map.

    Properties (derived values such as `layer_types` of Mamba) are not
    settable and are left to the config to derive from the new sizes.
    """
    import dataclasses
    names = {f.name for f in dataclasses.fields(cfg_cls)} if dataclasses.is_dataclass(cfg_cls) else set()
    if not names:
        import inspect
        names = set(inspect.signature(cfg_cls.__init__).parameters) - {"self", "kwargs"}
    aliases = {k for k, v in getattr(cfg_cls, "attribute_map", {}).items() if v in names}
    return names | aliases


def _value(cfg, key: str):
    """cfg.key; a per-layer attribute of a heterogeneous config (Gemma 4) has no global value: "set"."""
    try:
        return getattr(cfg, key, None)
    except Exception:  # noqa: BLE001 - AmbiguousGlobalPerLayerAttributeError and kin
        return "per-layer"


def _sub_config_names(cfg) -> list[str]:
    from transformers import PreTrainedConfig
    names = list(getattr(type(cfg), "sub_configs", None) or {})
    return [n for n in names if isinstance(getattr(cfg, n, None), PreTrainedConfig)]


def _shrunk_kwargs(default, sizes: dict[str, object]) -> dict[str, object]:
    """Constructor kwargs that shrink `default` (a config instance) to `sizes`, sub-configs included."""
    fields = _fields(type(default))
    always = ("dtype", "pad_token_id", "bos_token_id", "eos_token_id", "num_key_value_heads", "head_dim",
              "num_experts_per_tok", "n_routed_experts", "n_shared_experts")
    # A size is set only where the architecture has it (None means "feature
    # off", e.g. q_lora_rank=None: keep it off).
    aliases = getattr(type(default), "attribute_map", {})
    kwargs: dict[str, object] = {}
    for k, v in sizes.items():
        if k in fields and (_value(default, k) is not None or k in always):
            # pass the field, not its alias: __post_init__ reads fields before aliases are applied
            # (DBRX copies d_model into its FFN config there)
            real = aliases.get(k, k)
            if real not in kwargs or k == real:
                kwargs[real] = v
    if "qk_rope_head_dim" in kwargs:
        # multi-head latent attention: rotary runs on the qk_rope part and
        # every head has its own latent keys/values
        kwargs["head_dim"] = kwargs["qk_rope_head_dim"]
        kwargs["num_key_value_heads"] = kwargs.get("num_attention_heads", 4)
    # Per-layer patterns sized for the full depth must follow the new depth,
    # and keep one layer of each kind (a hybrid whose first two layers are
    # linear attention would otherwise lose its attention layers).
    for key in ("layer_types", "block_types", "layers_block_type"):
        pattern = _value(default, key)
        # set the field itself, not an alias of it (the alias would win over the field)
        if key in fields and key not in aliases and isinstance(pattern, (list, tuple)) and pattern:
            kinds = list(dict.fromkeys(pattern))
            kinds = kinds if len(kinds) >= 2 else kinds * 2
            # order as the default does: a pattern starting with attention keeps it first
            kwargs[key] = kinds
            for depth_key in ("num_hidden_layers", "num_layers", "n_layer", "n_layers"):
                if depth_key in kwargs:
                    kwargs[depth_key] = len(kinds)
    if "mlp_only_layers" in fields and _value(default, "mlp_only_layers"):
        kwargs["mlp_only_layers"] = []
    for name in _sub_config_names(default):
        sub = getattr(default, name)
        # towers (vision, audio, ...) only need to be small; other parts (DBRX's attn/ffn configs) are the LM
        is_text = name in TEXT_SUBCONFIG_NAMES or not any(t in name for t in TOWER_WORDS)
        kwargs[name] = _shrunk_kwargs(sub, TEXT_SIZES if is_text else TOWER_SIZES)
        kwargs[name]["model_type"] = sub.model_type
    return kwargs


def tiny_config(arch: str, model_cls=None):
    """A tiny float32 config of architecture `arch` (a model_type of the causal-LM mapping).

    Where the causal-LM class takes a sub-config (Qwen3_5ForCausalLM takes the
    text config of the multimodal Qwen3_5Config), that sub-config is returned.
    """
    from transformers import CONFIG_MAPPING
    cls = CONFIG_MAPPING[arch]
    default = cls()
    kwargs = _shrunk_kwargs(default, TEXT_SIZES)
    overrides = dict(ARCH_OVERRIDES.get(arch, {}))
    text_names = [n for n in TEXT_SUBCONFIG_NAMES if isinstance(kwargs.get(n), dict)]
    target = kwargs[text_names[0]] if text_names else kwargs
    target.update(overrides)
    # Decoder variants of encoder models (BERT-likes) are causal only with is_decoder.
    if "is_decoder" in _fields(cls):
        kwargs["is_decoder"] = True
    config = cls(**kwargs)
    wanted = getattr(model_cls, "config_class", None)
    if wanted is not None and not isinstance(config, wanted):
        for name in _sub_config_names(config):
            if isinstance(getattr(config, name), wanted):
                return getattr(config, name)
        if issubclass(wanted, cls.__mro__[1]) and wanted is not type(config):
            # an alias model_type (internlm3 -> LlamaForCausalLM): rebuild as the class the model takes
            return wanted(**{k: v for k, v in config.to_dict().items() if k in _fields(wanted)})
    return config


def build_model(arch: str, seed: int = 0):
    """The causal-LM model of `arch`, tiny, float32, randomly initialised from `seed`, in eval mode, on CPU."""
    import transformers
    model_cls = getattr(transformers, causal_lm_architectures()[arch])
    config = tiny_config(arch, model_cls)
    torch.manual_seed(seed)
    model = model_cls(config).to(torch.float32).eval()
    return model
