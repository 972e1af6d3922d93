"""Which model a plan is for: a bundled preset, a Transformers config.json, or a local model directory.

Only the configuration is read (no weights). The presets are the published config.json numbers of well-known
public checkpoints (each file names its source in "_source"), so a plan for "llama-3.1-70b" is a plan for that
architecture at its real size.
"""

from __future__ import annotations

import json
import os
from importlib import resources


class PlanError(ValueError):
    """Bad input to a plan: the message names the problem and what to pass instead."""


def presets() -> list[str]:
    """Names of the bundled presets (e.g. "llama-3.1-70b")."""
    folder = resources.files(__package__) / "presets"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def _preset_path(name: str):
    return resources.files(__package__) / "presets" / f"{name.lower()}.json"


def load_config_dict(model: str) -> tuple[dict, str]:
    """The config.json contents for MODEL and where it came from (preset name or path)."""
    if os.path.isdir(model):
        path = os.path.join(model, "config.json")
        if not os.path.isfile(path):
            raise PlanError(f"{model!r} is a directory without a config.json: pass a Transformers model directory, "
                            f"a config.json, or one of the presets: {', '.join(presets())}")
    elif os.path.isfile(model):
        path = model
    else:
        preset = _preset_path(model)
        if not preset.is_file():
            raise PlanError(f"{model!r} is neither a config.json, a model directory, nor a preset. "
                            f"Presets: {', '.join(presets())}")
        return json.loads(preset.read_text()), f"preset {model.lower()}"
    try:
        with open(path) as f:
            return json.load(f), path
    except (OSError, json.JSONDecodeError) as e:
        raise PlanError(f"cannot read {path!r} as a Transformers config.json: {e}") from None


def load_config(model: str):
    """A transformers PretrainedConfig for MODEL (preset name, config.json or model directory)."""
    from transformers import AutoConfig

    data, source = load_config_dict(model)
    data = {k: v for k, v in data.items() if not k.startswith("_")}
    if "model_type" not in data:
        raise PlanError(f"{source}: no \"model_type\" key, so Transformers cannot tell the architecture")
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    try:
        config = AutoConfig.for_model(**data)
    except (ValueError, KeyError) as e:
        raise PlanError(f"{source}: Transformers cannot build this configuration: {e}") from None
    if config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise PlanError(f"{source}: model_type {config.model_type!r} has no causal-LM class in Transformers "
                        f"(AutoModelForCausalLM), and a plan models a causal-LM training step: pass the config of a "
                        f"decoder such as llama, qwen2, mistral or mixtral")
    return config, source


def head_counts(config) -> tuple[int, int]:
    """(attention heads, key/value heads) of a decoder config."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = getattr(text, "num_attention_heads", None)
    if heads is None:
        raise PlanError(f"{type(config).__name__} has no num_attention_heads: not a decoder the plan can shard")
    kv = getattr(text, "num_key_value_heads", None) or heads
    return heads, kv


def tp_degrees_for_heads(config, candidates) -> list[int]:
    """The TP degrees among CANDIDATES that divide both the attention and the key/value heads."""
    heads, kv = head_counts(config)
    return [tp for tp in candidates if heads % tp == 0 and kv % tp == 0]


def check_tp(config, tp: int, candidates) -> None:
    """Raise PlanError if TP does not divide the heads, naming the counts and the degrees that work."""
    heads, kv = head_counts(config)
    if heads % tp == 0 and kv % tp == 0:
        return
    ok = tp_degrees_for_heads(config, candidates)
    raise PlanError(f"tensor parallel degree {tp} does not divide the model's heads ({heads} attention heads, "
                    f"{kv} key/value heads): each TP rank must hold whole heads. TP degrees that work on this "
                    f"instance: {', '.join(map(str, ok))}")
