"""Context parallelism of every Diffusers transformer that carries a `_cp_plan`, across NeuronCores, unmodified
Diffusers: each rank holds the whole model and 1/N of the sequence; attention runs as Ulysses (an all-to-all of the
heads) or Ring attention (every rank's K/V gathered, partial attentions merged by their log-sum-exp); the c10d
"neuron" backend moves the data, and the output equals one CPU process's.

    python examples/hf_diffusers_cp.py --cp 2           # every planned transformer, Ulysses and ring, torchrun
    python examples/hf_diffusers_cp.py --cp 4 --models WanTransformer3DModel --kinds ring --compiled-runs none
    python examples/hf_diffusers_cp.py --cp 2 --compiled-runs once          # what the test runs: a compile per class

For each transformer class of the installed Diffusers whose `_cp_plan` is set (Flux, Flux2, QwenImage, Wan,
ChronoEdit, Helios, LTX, LTX-2 and MiniMax-H3 in Diffusers 0.42.1), the launcher saves a tiny random model like a
real checkpoint (safetensors), computes its output on CPU, then starts one `torchrun` in which every rank, for each
model and each kind of context parallelism (`ContextParallelConfig(ulysses_degree=N)` or `(ring_degree=N)`):

  1. shards after loading: `from_pretrained(path)`, then `model.enable_parallelism(config=cp)`
  2. shards while loading: `from_pretrained(path, parallel_config=ParallelConfig(context_parallel_config=cp))`

and runs each eager and compiled (`torch.compile(backend="neuron")`, or `--compile regional`: Diffusers'
`compile_repeated_blocks`; `--compiled-runs` picks which runs are compiled) on `neuron:LOCAL_RANK`; each rank's
output is compared with the CPU output. Then it runs the MiniMax-H3 pipeline (denoising and decoding a video with
its soundtrack) with its transformer context-parallel. Ring attention needs an attention kernel that returns its
log-sum-exp: Diffusers' `native` backend has none (it refuses ring attention on every device), so ring runs select
`_native_flash` (`model.set_attention_backend("_native_flash")`), which calls
`aten::_scaled_dot_product_flash_attention`; the plugin implements it on neuron. What every rank runs is the user's
script:

    dist.init_process_group("neuron")
    cp = ParallelConfig(context_parallel_config=ContextParallelConfig(ulysses_degree=world))
    model = WanTransformer3DModel.from_pretrained(path, parallel_config=cp)
    model.to(f"neuron:{local_rank}")

Against CUDA the script differs only in the backend name ("neuron" instead of "nccl") and the device string.
What Diffusers 0.42.1 itself cannot run, on any device, is listed in REFUSALS (with the line and the upstream fix) and
checked to fail as it does: ring attention with the default backend, a bare ContextParallelConfig to from_pretrained,
TP and CP together, LTX-2's and (below 40 blocks) Helios's own plans, text masks. Where Diffusers' documented
`enable_parallelism(cp_plan=...)` supplies a working plan (PLANS), the example uses it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_common  # noqa: E402,F401
import torch  # noqa: E402
import torch_neuronx  # noqa: E402

import hf_diffusers_tp  # noqa: E402

WAYS = hf_diffusers_tp.WAYS
KINDS = ("ulysses", "ring")
ATOL = hf_diffusers_tp.ATOL
# The attention backend ring attention runs with: the one Diffusers 0.42.1 backend that returns the log-sum-exp the
# ring merges without a CUDA-only package (attention_dispatch.py, `_native_flash_attention`).
RING_BACKEND = "_native_flash"


# ---- tiny configs and inputs of the planned transformers ------------------------------------------------------------
# Every head count is divisible by 4 (Ulysses gives each rank heads / N heads) and every split sequence (video
# tokens, text tokens, the rotary tables) by 4 (Diffusers splits it in N equal parts), so each model runs over 2 or 4
# ranks. Flux, Flux2 and QwenImage use the tensor-parallel example's configs.

def _video_inputs(g: torch.Generator) -> dict:
    """Wan-style video latents: 2 frames of 4 x 4, patches of 1 x 2 x 2: 8 tokens; 8 text tokens."""
    return {"hidden_states": torch.randn(1, 16, 2, 4, 4, generator=g), "timestep": torch.tensor([500]),
            "encoder_hidden_states": torch.randn(1, 8, 32, generator=g)}


def _ltx_inputs(g: torch.Generator) -> dict:
    frames, height, width, text = 2, 2, 2, 8
    return {"hidden_states": torch.randn(1, frames * height * width, 8, generator=g),
            "encoder_hidden_states": torch.randn(1, text, 32, generator=g), "timestep": torch.tensor([500]),
            "encoder_attention_mask": None, "num_frames": frames, "height": height, "width": width}


def _ltx2_inputs(g: torch.Generator) -> dict:
    frames, height, width, text, audio = 2, 2, 2, 8, 4
    return {"hidden_states": torch.randn(1, frames * height * width, 4, generator=g),
            "audio_hidden_states": torch.randn(1, audio, 4, generator=g),
            "encoder_hidden_states": torch.randn(1, text, 32, generator=g),
            "audio_encoder_hidden_states": torch.randn(1, text, 32, generator=g), "timestep": torch.tensor([500]),
            # passed, as the pipeline does: Diffusers' split hook looks up every planned input (an absent one raises)
            "encoder_attention_mask": None, "audio_encoder_attention_mask": None, "num_frames": frames, "height": height, "width": width, "audio_num_frames": audio, "fps": 24.0}


def _qwenimage_inputs(g: torch.Generator) -> dict:
    """As the QwenImage pipeline calls it for prompts without padding: no text mask (it drops an all-ones one)."""
    return dict(hf_diffusers_tp.TINY["QwenImageTransformer2DModel"][1](g), encoder_hidden_states_mask=None)


def _minimax_h3_inputs(g: torch.Generator) -> dict:
    """One packed sequence: 4 text rows, 8 video rows, 4 audio rows, each tagged with its modality."""
    text, video, audio = 4, 8, 4
    rows = text + video + audio
    tags = torch.tensor([1] * text + [0] * video + [2] * audio)
    positions = torch.stack([torch.arange(rows), torch.arange(rows) % 2, torch.arange(rows) % 3], -1)
    return {"hidden_states": torch.randn(1, video, 16, generator=g),
            "audio_hidden_states": torch.randn(1, audio, 8, generator=g),
            "encoder_hidden_states": torch.randn(1, text, 32, generator=g),
            "timestep": torch.tensor([0.5, 0.9]), "timestep_indices": (torch.arange(rows) >= text).long(),
            "token_tags": tags, "position_ids": positions, "video_indices": torch.arange(text, text + video),
            "audio_indices": torch.arange(text + video, rows), "text_indices": torch.arange(text)}


_WAN = dict(patch_size=(1, 2, 2), num_attention_heads=4, attention_head_dim=8, in_channels=16, out_channels=16,
            text_dim=32, freq_dim=32, ffn_dim=32, num_layers=1, rope_max_seq_len=32)

_HELIOS = {k: v for k, v in _WAN.items() if k != "rope_max_seq_len"} | dict(rope_dim=(2, 2, 4))
# A case of its own: a class name with a variant after "/" (the class is what comes before).
HELIOS_2_BLOCKS = "HeliosTransformer3DModel/2 blocks"

TINY = {
    **{name: hf_diffusers_tp.TINY[name] for name in ("FluxTransformer2DModel", "Flux2Transformer2DModel")},
    "QwenImageTransformer2DModel": (hf_diffusers_tp.TINY["QwenImageTransformer2DModel"][0], _qwenimage_inputs),
    "WanTransformer3DModel": (_WAN, _video_inputs),
    "ChronoEditTransformer3DModel": (_WAN, _video_inputs),
    # Helios's _cp_plan names the attention and FFN modules of blocks 0..39 (transformer_helios.py:573): it applies
    # to models of 40 blocks (the released one), so the tiny one has 40 narrow blocks. Compiling all 40 (one graph
    # of ~6000 ops) takes minutes; the compiled run uses HELIOS_2_BLOCKS.
    "HeliosTransformer3DModel": (_HELIOS | dict(num_layers=40), _video_inputs),
    HELIOS_2_BLOCKS: (_HELIOS | dict(num_layers=2), _video_inputs),
    "LTXVideoTransformer3DModel": (dict(in_channels=8, out_channels=8, patch_size=1, patch_size_t=1,
                                        num_attention_heads=4, attention_head_dim=8, cross_attention_dim=32,
                                        num_layers=1, caption_channels=32), _ltx_inputs),
    "LTX2VideoTransformer3DModel": (dict(in_channels=4, out_channels=4, patch_size=1, patch_size_t=1,
                                         num_attention_heads=4, attention_head_dim=8, cross_attention_dim=32,
                                         audio_in_channels=4, audio_out_channels=4, audio_num_attention_heads=4,
                                         audio_attention_head_dim=4, audio_cross_attention_dim=16, num_layers=1,
                                         caption_channels=32, rope_double_precision=False),
                                    _ltx2_inputs),
    # head_dim 12: its rotary embedding rotates 2 x 3 axes x rope_freq_dim channels of every head
    "MiniMaxH3Transformer3DModel": (dict(num_attention_heads=4, attention_head_dim=12, hidden_size=48, num_layers=1,
                                         num_refiner_layers=1, ffn_dim=32, in_channels=4, audio_in_channels=8,
                                         text_dim=32, freq_dim=32, time_embed_hidden_dim=32, time_embed_dim=16,
                                         rope_freq_dim=2), _minimax_h3_inputs),
}



def _ltx2_plan_with_cross_attention_rope() -> dict:
    """LTX-2's _cp_plan plus the split of its audio-video cross-attention rotary table (`cross_attn_rope`): the
    class's plan (transformer_ltx2.py:1125) splits the video rows and `rope`'s tables but not that one, so the
    video queries of the audio-to-video attention (split) meet an unsplit table, on every device."""
    from diffusers import LTX2VideoTransformer3DModel
    from diffusers.models._modeling_parallel import ContextParallelInput
    split = ContextParallelInput(split_dim=1, expected_dims=3, split_output=True)
    return dict(LTX2VideoTransformer3DModel._cp_plan, cross_attn_rope={0: split, 1: split})


def _helios_plan_for_its_blocks(model) -> dict:
    """Helios's _cp_plan with its per-block output gathers for the model's own blocks instead of blocks 0..39."""
    from diffusers.models._modeling_parallel import ContextParallelOutput
    plan = {k: v for k, v in type(model)._cp_plan.items() if not k[len("blocks."):].split(".")[0].isdigit()}
    for i in range(len(model.blocks)):
        for part in ("attn1", "attn2", "ffn"):
            plan[f"blocks.{i}.{part}"] = ContextParallelOutput(gather_dim=1, expected_dims=3)
    return plan


# The plan given to enable_parallelism(cp_plan=...) (Diffusers' documented way of supplying one) where the class's own
# does not apply; from_pretrained(parallel_config=...) has no such argument: it keeps the class's plan (REFUSALS).
PLANS = {"LTX2VideoTransformer3DModel": lambda model: _ltx2_plan_with_cross_attention_rope(),
         HELIOS_2_BLOCKS: _helios_plan_for_its_blocks}
# Cases run eager only (EAGER_ONLY[case] is the case compiled in their place).
EAGER_ONLY = {"HeliosTransformer3DModel": HELIOS_2_BLOCKS}
# Cases that are variants of another class's case: not a class of their own in `planned_classes`.
VARIANTS = {HELIOS_2_BLOCKS}


def class_of(case: str) -> str:
    return case.split("/")[0]


# Text masks as the pipelines pass them for padded prompts (the inputs above have none).
MASKS = {
    "LTXVideoTransformer3DModel": lambda: {"encoder_attention_mask": torch.ones(1, 8, dtype=torch.long)},
    "LTX2VideoTransformer3DModel": lambda: {"encoder_attention_mask": torch.ones(1, 8, dtype=torch.long),
                                            "audio_encoder_attention_mask": torch.ones(1, 8, dtype=torch.long)},
    "QwenImageTransformer2DModel": lambda: {"encoder_hidden_states_mask": torch.ones(1, 8, dtype=torch.long)},
}


@dataclasses.dataclass(frozen=True)
class Refusal:
    """A combination Diffusers 0.42.1 itself cannot run, on any device (CUDA too): run to check it still fails so."""
    what: str
    model: str
    kind: str
    expect: str                       # the error Diffusers raises: a regular expression matching its start
    where: str                        # where in Diffusers, and the upstream fix
    way: str = "enable_parallelism"
    backend: str | None = None        # attention backend (None: the kind's default here)
    masks: bool = False               # with the pipelines' text masks
    config: str = "cp"                # "cp"; "bare": a bare ContextParallelConfig to from_pretrained; "tp+cp"


REFUSALS = (
    Refusal("ring attention with Diffusers' default attention backend", "FluxTransformer2DModel", "ring",
            "ValueError: Native attention does not support return_lse=True", backend="native",
            where="attention_dispatch.py:876, _native_attention_forward_op: ring attention merges the partial "
                  "attentions by their log-sum-exp, which the `native` backend (F.scaled_dot_product_attention) does "
                  "not return; select `_native_flash` (as here) or, on CUDA, `_native_cudnn`/`flash`"),
    Refusal("a bare ContextParallelConfig given to from_pretrained", "FluxTransformer2DModel", "ulysses",
            "AttributeError: 'ContextParallelConfig' object has no attribute 'tensor_parallel_config'",
            way="from_pretrained", config="bare",
            where="modeling_utils.py:1242 reads `parallel_config.tensor_parallel_config` of every config that is not "
                  "a TensorParallelConfig; fix: getattr(parallel_config, 'tensor_parallel_config', None), as "
                  "enable_parallelism does (modeling_utils.py:1765); meanwhile wrap it: ParallelConfig("
                  "context_parallel_config=...)"),
    Refusal("tensor and context parallelism together", "FluxTransformer2DModel", "ulysses",
            r"ValueError: Combining context parallelism and tensor parallelism in a single `ParallelConfig` is not "
            "supported", config="tp+cp",
            where="_modeling_parallel.py:221, ParallelConfig.__post_init__ refuses both configs, and "
                  "enable_parallelism cannot be called twice (modeling_utils.py:1757): no 2-D TP x CP mesh in "
                  "0.42.1"),
    Refusal("LTX-2 with its own plan", "LTX2VideoTransformer3DModel", "ulysses",
            "RuntimeError: The size of tensor a", way="from_pretrained",
            where="transformer_ltx2.py:1125, the _cp_plan does not split `cross_attn_rope`'s outputs; fix: add "
                  "`\"cross_attn_rope\": {0: ContextParallelInput(split_dim=1, expected_dims=3, split_output=True), "
                  "1: ...}` (enable_parallelism(cp_plan=...) runs with it here)"),
    Refusal("Helios's own plan on a model of fewer than 40 blocks", HELIOS_2_BLOCKS, "ulysses",
            "ValueError: '2' is not a submodule", way="from_pretrained",
            where="transformer_helios.py:573-575 enumerate the gathers of blocks 0..39 (a plan is a dict and cannot "
                  "hold both the split and the gather of `blocks.*.attn1`); fix: let a plan entry carry both, or "
                  "take the gathers from the model's blocks"),
    # the mask's 4 heads against the rank's 2 (degree 2) or 1 (degree 4, which broadcasts the other way)
    *(Refusal("a text mask under Ulysses", model, "ulysses",
              r"RuntimeError: (The size of tensor a|output with shape \[1, 1, 8, 8\] doesn't match the broadcast)",
              masks=True,
              where=f"{source}, the processor expands the mask to all heads before Ulysses gives each rank heads / N "
                    f"of them (attention_dispatch.py:2575 gathers only its sequence); fix: keep the mask "
                    f"broadcastable over heads ([batch, 1, 1, keys]), as QwenImage does")
      for model, source in (("LTXVideoTransformer3DModel", "transformer_ltx.py:77"),
                            ("LTX2VideoTransformer3DModel", "transformer_ltx2.py:176"))),
    *(Refusal("a text mask under ring attention", model, "ring",
              "ValueError: `attn_mask` is not supported for native flash attention", masks=True,
              where="attention_dispatch.py:3895: `_native_flash`, the one backend returning the log-sum-exp off "
                    "CUDA, takes no mask, and TemplatedRingAttention (attention_dispatch.py:2386) passes every "
                    "iteration the whole mask while K/V rotate; fix: rotate the mask's key blocks with K/V and let "
                    "`_native_efficient` return the log-sum-exp (aten._scaled_dot_product_efficient_attention "
                    "takes a mask)")
      for model in ("QwenImageTransformer2DModel", "LTXVideoTransformer3DModel")),
)


def planned_classes() -> tuple[str, ...]:
    """Every transformer class of the installed Diffusers with a context-parallel plan (`_cp_plan`)."""
    return hf_diffusers_tp.planned_classes("_cp_plan")


def cases_of(classes) -> list[str]:
    """The cases that run the classes: each class, and its variants (HELIOS_2_BLOCKS)."""
    return [c for c in TINY if class_of(c) in classes]


def _outputs(out) -> list[torch.Tensor]:
    """Every tensor a transformer returned (return_dict=False): the video sample, and MiniMax-H3's audio sample."""
    return [t for t in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(t, torch.Tensor)]


def build(case: str, root: str, seed: int = 0) -> str:
    """Save the tiny model of `case` (safetensors, as from_pretrained reads it), its inputs and every output of its
    forward on CPU under root/case."""
    import diffusers

    config, make_inputs = TINY[case]
    path = os.path.join(root, case.replace("/", "-").replace(" ", "_"))
    torch.manual_seed(seed)
    model = getattr(diffusers, class_of(case))(**config).eval()
    model.save_pretrained(path)
    inputs = make_inputs(torch.Generator().manual_seed(seed))
    with torch.no_grad():
        reference = _outputs(model(**inputs, return_dict=False))
    torch.save({"inputs": inputs, "reference": reference}, os.path.join(path, "io.pt"))
    return path


def compiled_runs(cases: list[str], kinds: list[str], how: str) -> dict[str, list[tuple[str, str]]]:
    """case -> the (kind, way) runs that are also compiled. all: every run; once: one per case, the kind alternating
    from case to case and the way every other case (both kinds and both ways are compiled, a compile per class);
    none. A case whose way is refused compiles the other way; an EAGER_ONLY case compiles its stand-in instead."""
    runs = {}
    for i, case in enumerate(c for c in cases if c not in EAGER_ONLY):
        ways = [w for w in WAYS if not refused_way(case, w)]
        if how == "all":
            runs[case] = [(k, w) for k in kinds for w in ways]
        elif how == "once":
            way = ways[(i // 2) % len(ways)] if len(ways) > 1 else ways[0]
            runs[case] = [(kinds[i % len(kinds)], way)]
        else:
            runs[case] = []
    return runs


def refused_way(case: str, way: str) -> bool:
    """Whether Diffusers cannot load `case` this way with its ordinary inputs (checked in run_refusals instead)."""
    return any(r.model == case and r.way == way and not r.masks and r.config == "cp" and r.backend is None
               for r in REFUSALS)


# ---- MiniMax-H3 end to end --------------------------------------------------------------------------------------------
# MiniMax-H3 is a modular pipeline: a packed sequence of text, video and audio rows through one transformer, then a
# video VAE and an audio VAE. Its text encoder (Qwen3-VL, whose hidden state 50 conditions the transformer) needs a
# Qwen3VLProcessor, which Transformers 5.23 cannot make without torchvision (not installed here: the same reason the
# compatibility suite lists for every Qwen-VL pipeline), so the pipeline runs from the prompt's embeddings: its
# denoising (packed layout, noise, both schedulers, the transformer context-parallel) and decoding blocks.
MINIMAX_H3_TEXT_ROWS = 5  # with 37 video rows (124 frames of 32 x 32) and 2 x 207 audio rows: 456, a multiple of 4
MINIMAX_H3_CALL = dict(height=32, width=32, num_frames=124, num_inference_steps=3)  # 5.2 s at 24 fps, the shortest


def build_minimax_h3_pipeline(root: str, seed: int = 0) -> str:
    """Save the tiny components of a MiniMax-H3 pipeline (transformer, video VAE, audio VAE) and its output on CPU."""
    from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio, MiniMaxH3Transformer3DModel

    path = os.path.join(root, "minimax-h3")
    torch.manual_seed(seed)
    config = TINY["MiniMaxH3Transformer3DModel"][0] | dict(in_channels=4, audio_in_channels=4)
    MiniMaxH3Transformer3DModel(**config).save_pretrained(os.path.join(path, "transformer"))
    AutoencoderKLMiniMaxH3(latent_channels=4, block_out_channels=(8,) * 6, layers_per_block=1, norm_num_groups=4,
                           decoder_num_layers=1, decoder_num_attention_heads=2, decoder_attention_head_dim=8,
                           decoder_num_register_tokens=1, latents_mean=(0.0,) * 4, latents_std=(1.0,) * 4
                           ).save_pretrained(os.path.join(path, "vae"))
    # 128 decoder channels: its 7 upsampling stages halve them
    AutoencoderKLMiniMaxH3Audio(encoder_dim=4, latent_dim=16, latent_channels=4, num_attention_heads=2, decoder_dim=128,
                                resblock_kernel_sizes=(3,), resblock_dilation_sizes=((1,),), latents_mean=[0.0] * 4,
                                latents_std=[1.0] * 4).save_pretrained(os.path.join(path, "audio_vae"))
    prompt_embeds = torch.randn(1, MINIMAX_H3_TEXT_ROWS, config["text_dim"], generator=torch.Generator().manual_seed(1))
    torch.save(prompt_embeds, os.path.join(path, "prompt_embeds.pt"))
    torch.save(generate_minimax_h3(load_minimax_h3_pipeline(path), path), os.path.join(path, "cpu.pt"))
    return path


def load_minimax_h3_pipeline(path: str, parallel_config=None, backend: str = "native"):
    """The pipeline of the saved components; the transformer sharded while loading when `parallel_config` is given."""
    from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio, MiniMaxH3Scheduler
    from diffusers import MiniMaxH3Transformer3DModel
    from diffusers.modular_pipelines import SequentialPipelineBlocks
    from diffusers.modular_pipelines.minimax_h3.modular_blocks_minimax_h3 import (MiniMaxH3CoreDenoiseStep,
                                                                                   MiniMaxH3DecodeStep)

    blocks = SequentialPipelineBlocks.from_blocks_dict({"denoise": MiniMaxH3CoreDenoiseStep(),
                                                        "decode": MiniMaxH3DecodeStep()})
    pipe = blocks.init_pipeline()
    transformer = MiniMaxH3Transformer3DModel.from_pretrained(os.path.join(path, "transformer"),
                                                             parallel_config=parallel_config)
    transformer.set_attention_backend(backend)
    pipe.update_components(transformer=transformer,
                           vae=AutoencoderKLMiniMaxH3.from_pretrained(os.path.join(path, "vae")),
                           audio_vae=AutoencoderKLMiniMaxH3Audio.from_pretrained(os.path.join(path, "audio_vae")),
                           scheduler=MiniMaxH3Scheduler(shift=12.0), audio_scheduler=MiniMaxH3Scheduler(shift=3.0))
    pipe.set_progress_bar_config(disable=True)
    return pipe


def generate_minimax_h3(pipe, path: str) -> dict:
    """A 124-frame video with its stereo soundtrack: the noise from a CPU generator (the same latents everywhere)."""
    # on the pipeline's device, where its text encoder step would have left them
    prompt_embeds = torch.load(os.path.join(path, "prompt_embeds.pt")).to(pipe._execution_device)
    out = pipe(prompt_embeds=prompt_embeds, text_token_tags=torch.ones(MINIMAX_H3_TEXT_ROWS, dtype=torch.long),
               generator=torch.Generator().manual_seed(0), output_type="np", output=["videos", "audio"],
               **MINIMAX_H3_CALL)
    return {"video": torch.as_tensor(out["videos"]).float().cpu(), "audio": out["audio"].float().cpu()}


def run_minimax_h3_pipeline(args, rank: int, world: int, device: torch.device) -> list[dict]:
    from diffusers import ParallelConfig
    reference = torch.load(os.path.join(args.pipeline_path, "cpu.pt"))
    rows = []
    for kind in args.kinds:
        t0 = time.monotonic()
        parallel = ParallelConfig(context_parallel_config=cp_config(kind, world))
        pipe = load_minimax_h3_pipeline(args.pipeline_path, parallel, RING_BACKEND if kind == "ring" else "native")
        pipe.to(device)
        out = generate_minimax_h3(pipe, args.pipeline_path)
        rows.append(dict(pipeline="MiniMax-H3", kind=kind, rank=rank, transformer=str(pipe.transformer.device),
                         shapes={k: list(v.shape) for k, v in out.items()},
                         diff={k: float((out[k] - reference[k]).abs().max()) for k in reference},
                         seconds=round(time.monotonic() - t0, 1)))
    return rows


# ---- what every rank runs --------------------------------------------------------------------------------------------

def cp_config(kind: str, world: int):
    from diffusers import ContextParallelConfig
    return ContextParallelConfig(**{f"{kind}_degree": world})


def load_parallel(case: str, path: str, kind: str, way: str, world: int, device: torch.device,
                  backend: str | None = None, config: str = "cp"):
    """The model of `path` on `device`, context-parallel over the world (`config`: see Refusal)."""
    import diffusers
    from diffusers import ParallelConfig, TensorParallelConfig

    cls = getattr(diffusers, class_of(case))
    # Set for every model, Ulysses's too: set_attention_backend also makes its backend the process-wide default for
    # models loaded later (modeling_utils.py:668), so an earlier ring model would otherwise choose it.
    backend = backend or (RING_BACKEND if kind == "ring" else "native")
    cp = cp_config(kind, world)

    def parallel():
        if config == "bare":
            return cp
        tp = TensorParallelConfig(tp_degree=world) if config == "tp+cp" else None
        return ParallelConfig(context_parallel_config=cp, tensor_parallel_config=tp)

    if way == "enable_parallelism":
        model = cls.from_pretrained(path)
        model.set_attention_backend(backend)
        model.enable_parallelism(config=parallel(), cp_plan=PLANS[case](model) if case in PLANS else None)
    else:
        # A ContextParallelConfig wrapped in a ParallelConfig: see REFUSALS for the bare one.
        model = cls.from_pretrained(path, parallel_config=parallel())
        model.set_attention_backend(backend)
    return model.to(device).eval()


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def _diff(outs: list[torch.Tensor], reference: list[torch.Tensor]) -> float:
    return max(float((o.float().cpu() - r).abs().max()) for o, r in zip(outs, reference, strict=True))


def _compile(model, how: str) -> None:
    torch._dynamo.reset()
    if how == "regional":  # each repeated block (Diffusers' `_repeated_blocks`), as Diffusers recommends
        model.compile_repeated_blocks(backend="neuron", dynamic=False)
    else:
        model.compile(backend="neuron", dynamic=False)


def run_cases(args, rank: int, world: int, device: torch.device) -> list[dict]:
    rows = []
    for case in args.cases:
        path = os.path.join(args.root, case.replace("/", "-").replace(" ", "_"))
        io = torch.load(os.path.join(path, "io.pt"))
        inputs = hf_diffusers_tp._to(io["inputs"], device)
        compiled = [tuple(r) for r in args.compiled.get(case, [])]
        for kind in args.kinds:
            for way in WAYS:
                if refused_way(case, way) or (case in VARIANTS and (kind, way) not in compiled):
                    continue  # a variant runs where it is compiled
                model = load_parallel(case, path, kind, way, world, device)
                for mode in ("eager", "compiled") if (kind, way) in compiled else ("eager",):
                    t0 = time.monotonic()
                    row = dict(model=case, kind=kind, way=way, mode=mode, rank=rank)
                    if mode == "compiled":
                        before = torch_neuronx.compile_stats()
                        _compile(model, args.compile)
                    try:
                        with torch.no_grad():
                            outs = _outputs(model(**inputs, return_dict=False))
                        row.update(device=str(outs[0].device), diff=_diff(outs, io["reference"]))
                    except Exception as e:  # noqa: BLE001 - reported per run; the launcher fails with it
                        row["error"] = _first_line(e)
                    row["seconds"] = round(time.monotonic() - t0, 1)
                    if mode == "compiled":
                        after = torch_neuronx.compile_stats()
                        row.update(graphs=after["graphs_compiled"] - before["graphs_compiled"],
                                   recompiles=len(after["recompiles"]) - len(before["recompiles"]),
                                   graph_breaks=len(after["graph_breaks"]) - len(before["graph_breaks"]))
                    rows.append(row)
                del model
    return rows


def run_refusals(args, rank: int, world: int, device: torch.device) -> list[dict]:
    """Every Refusal whose case this run built: the error Diffusers raises."""
    rows = []
    for i, refusal in enumerate(REFUSALS):
        if refusal.model not in args.cases:
            continue
        path = os.path.join(args.root, refusal.model.replace("/", "-").replace(" ", "_"))
        inputs = dict(torch.load(os.path.join(path, "io.pt"))["inputs"])
        if refusal.masks:
            inputs.update(MASKS[refusal.model]())
        row = dict(refusal=i, model=refusal.model, kind=refusal.kind, rank=rank)
        try:
            model = load_parallel(refusal.model, path, refusal.kind, refusal.way, world, device,
                                  backend=refusal.backend, config=refusal.config)
            with torch.no_grad():
                model(**hf_diffusers_tp._to(inputs, device), return_dict=False)
            row["error"] = None
        except Exception as e:  # noqa: BLE001 - the point: which error
            row["error"] = _first_line(e)
        rows.append(row)
    return rows


def worker(args) -> None:
    import torch.distributed as dist

    dist.init_process_group(backend="neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron", int(os.environ.get("LOCAL_RANK", rank)))
    torch.neuron.set_device(device)
    args.compiled = json.loads(args.compiled_json)
    rows = run_cases(args, rank, world, device) + run_refusals(args, rank, world, device)
    if args.pipeline_path:
        rows += run_minimax_h3_pipeline(args, rank, world, device)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump(rows, f)
    dist.barrier()
    dist.destroy_process_group()


# ---- the launcher ----------------------------------------------------------------------------------------------------

def check(rows: list[dict], atol: float) -> list[dict]:
    """The rows that went wrong: an error or a difference, or a refusal that now runs or fails otherwise."""
    bad = []
    for row in rows:
        if "refusal" in row:
            if not re.match(REFUSALS[row["refusal"]].expect, row["error"] or ""):
                bad.append(row)
        elif "pipeline" in row:
            if max(row["diff"].values()) > atol:
                bad.append(row)
        elif "error" in row or row["diff"] > atol:
            bad.append(row)
    return bad


def launch(args) -> dict:
    root = tempfile.mkdtemp(prefix="tiny-cp-models-")
    for case in args.cases:
        build(case, root)
    pipeline = build_minimax_h3_pipeline(root) if args.pipeline and "MiniMaxH3Transformer3DModel" in args.models \
        else None
    out = tempfile.mkdtemp(prefix="diffusers-cp-")
    compiled = compiled_runs(args.cases, args.kinds, args.compiled_runs)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.cp}",
           os.path.abspath(__file__), "--worker", "--root", root, "--out", out, "--cases-json", json.dumps(args.cases),
           "--kinds", *args.kinds, "--compiled-json", json.dumps(compiled), "--compile", args.compile] \
        + (["--pipeline-path", pipeline] if pipeline else [])
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"torchrun failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}")
    rows = [row for k in range(args.cp) for row in json.load(open(os.path.join(out, f"rank{k}.json")))]
    for row in rows:
        if row["rank"] != 0:
            continue
        if "pipeline" in row:
            print(f"[cp={args.cp}] {row['pipeline']} pipeline, transformer {row['kind']} over {args.cp} ranks: video "
                  f"{row['shapes']['video']} and audio {row['shapes']['audio']} vs CPU: max|diff| "
                  f"{max(row['diff'].values()):.2e}  ({row['seconds']} s)")
        elif "refusal" in row:
            refusal = REFUSALS[row["refusal"]]
            print(f"[cp={args.cp}] {row['model']:32s} {row['kind']:8s} {refusal.what}: refused by Diffusers "
                  f"({row['error']}) - {refusal.where}")
        else:
            what = row.get("error") or f"max|diff| {row['diff']:.2e}"
            graphs = (f", {row['graphs']} graphs, {row['recompiles']} recompiles, {row['graph_breaks']} breaks"
                      if "graphs" in row else "")
            print(f"[cp={args.cp}] {row['model']:32s} {row['kind']:8s} {row['way']:18s} {row['mode']:8s} vs CPU: "
                  f"{what}  ({row['seconds']} s{graphs})")
    result = dict(cp=args.cp, rows=rows, seconds=round(time.monotonic() - t0, 1), log=r.stdout + r.stderr)
    print(f"[cp={args.cp}] torchrun: {result['seconds']} s")
    bad = check(rows, args.atol)
    assert not bad, "\n".join(json.dumps(b) for b in bad)
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cp", type=int, default=2, help="context-parallel degree (ranks)")
    p.add_argument("--models", nargs="+", default=None,
                   help="transformer classes (default: every class of the installed Diffusers with a _cp_plan)")
    p.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS),
                   help="ulysses: ContextParallelConfig(ulysses_degree=N); ring: (ring_degree=N)")
    p.add_argument("--compiled-runs", choices=("all", "once", "none"), default="all",
                   help="which runs are also compiled: all; once per class (kinds and ways alternating); none")
    p.add_argument("--compile", choices=("full", "regional"), default="full",
                   help="full: torch.compile the transformer; regional: its repeated blocks (compile_repeated_blocks)")
    p.add_argument("--no-pipeline", dest="pipeline", action="store_false",
                   help="skip the MiniMax-H3 pipeline with its transformer context-parallel")
    p.add_argument("--atol", type=float, default=ATOL)
    p.add_argument("--timeout", type=int, default=3600)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--root", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--cases-json", help=argparse.SUPPRESS)
    p.add_argument("--compiled-json", help=argparse.SUPPRESS)
    p.add_argument("--pipeline-path", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        args.cases = json.loads(args.cases_json)
        return worker(args)
    args.models = args.models or list(planned_classes())
    missing = [m for m in args.models if m not in TINY]
    if missing:
        raise SystemExit(f"no tiny config for {', '.join(missing)}: add one to TINY in {__file__}")
    args.cases = cases_of(args.models)
    return launch(args)


if __name__ == "__main__":
    main()
