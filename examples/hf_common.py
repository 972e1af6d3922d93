"""Tiny, local Hugging Face assets for the examples: no model hub, nothing downloaded.

Every example builds what it needs here and saves it to a directory, then loads it back the way a user loads
a real checkpoint (`from_pretrained(path, ...)`): a byte-level BPE tokenizer trained on a small synthetic
corpus, a random-weight Llama causal LM, and a text dataset. Everything is deterministic for a given seed.
"""

from __future__ import annotations

import os
import random
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402  (loads torch_neuronx through the torch.backends entry point)

WORDS = (
    "the neuron core runs matrix multiply on tensor engine while vector engine handles activation and "
    "scalar engine computes softmax data moves between high bandwidth memory and state buffer compiler "
    "fuses graph into one kernel trainium chips train large language models inferentia chips serve them "
    "collective communication joins cores into one mesh sharded weights gather before forward"
).split()


def sample_texts(n: int, seed: int = 0, min_words: int = 6, max_words: int = 40) -> list[str]:
    """`n` pseudo-sentences from a fixed vocabulary: structured enough for a tiny model to learn something."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(min_words, max_words)
        start = rng.randrange(len(WORDS))
        # mostly follow the word order of WORDS (learnable), sometimes jump
        words, i = [], start
        for _ in range(k):
            words.append(WORDS[i % len(WORDS)])
            i = i + 1 if rng.random() < 0.85 else rng.randrange(len(WORDS))
        out.append(" ".join(words) + ".")
    return out


def build_tokenizer(save_dir: str | None = None, vocab_size: int = 384):
    """A byte-level BPE tokenizer trained here on the synthetic corpus (pad=0, bos=1, eos=2, unk=3)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(sample_texts(400, seed=1234), trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>", model_max_length=4096)
    if save_dir is not None:
        fast.save_pretrained(save_dir)
    return fast


def llama_config(vocab_size: int = 384, **overrides):
    from transformers import LlamaConfig

    cfg = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, pad_token_id=0,
               bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
               # a wider init than the default 0.02 spreads the logits of a random model, so greedy decoding
               # is decided by the weights, not by rounding noise at bf16 precision
               initializer_range=0.25)
    cfg.update(overrides)
    return LlamaConfig(**cfg)


def build_causal_lm(save_dir: str | None = None, seed: int = 0, with_tokenizer: bool = True, **overrides) -> str:
    """Save a random-weight tiny Llama (and its tokenizer) to `save_dir` (a fresh temp dir by default)."""
    from transformers import LlamaForCausalLM

    save_dir = save_dir or tempfile.mkdtemp(prefix="tiny-llama-")
    tok = build_tokenizer(save_dir if with_tokenizer else None)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama_config(vocab_size=len(tok), **overrides))
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(save_dir)
    return save_dir


def text_dataset(n: int = 64, seed: int = 0):
    from datasets import Dataset

    return Dataset.from_dict({"text": sample_texts(n, seed=seed)})


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.detach().float().cpu() - b.detach().float().cpu()).abs().max().item()


def run_plain_cpu(code: str, timeout: int = 600) -> str:
    """Run `code` in a fresh interpreter with the plugin NOT loaded (TORCH_DEVICE_BACKEND_AUTOLOAD=0): what a user
    without Neuron sees. Returns stdout; raises with stderr on failure. The code may print a JSON result."""
    import subprocess
    import sys

    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", HF_HUB_OFFLINE="1")
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "TORCHELASTIC_RUN_ID", "GROUP_RANK", "ROLE_RANK"):
        env.pop(k, None)
    guard = ("import sys, torch\n"
             "assert 'torch_neuronx' not in sys.modules and not hasattr(torch, 'neuron'), 'plugin loaded'\n")
    r = subprocess.run([sys.executable, "-c", guard + code], capture_output=True, text=True, env=env,
                       timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"plain-CPU subprocess failed:\n{r.stderr[-4000:]}")
    return r.stdout
