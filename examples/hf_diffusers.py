"""Diffusers on neuron, unmodified: a Flux pipeline (MMDiT transformer, CLIP + T5 text encoders, VAE) and a
Stable-Diffusion-style UNet pipeline, built from tiny random components and saved/loaded like real checkpoints,
run on neuron eager and compiled (torch.compile backend "neuron"); images equal CPU's within tolerance.

    python examples/hf_diffusers.py                       # both pipelines, eager (+ compiled when available)
    python examples/hf_diffusers.py --pipelines flux --steps 4 --size 64
    python examples/hf_diffusers.py --no-compile

Noise comes from a CPU generator (diffusers draws it on CPU for neuron by itself): the same latents on both.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_common  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

PROMPT = "the neuron core runs matrix multiply"


# ---- tiny components ------------------------------------------------------------------------------------------
def clip_tokenizer():
    from transformers import CLIPTokenizer

    chars = sorted(set("".join(hf_common.WORDS)))
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for c in chars:  # character-level CLIP BPE (no merges)
        vocab.setdefault(c, len(vocab))
        vocab.setdefault(c + "</w>", len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)


def t5_tokenizer():
    from transformers import T5Tokenizer

    words = sorted(set(hf_common.WORDS))
    chars = sorted(set("".join(words)))
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    pieces += [("\u2581" + w, -float(i)) for i, w in enumerate(words)] + [(c, -50.0) for c in chars]
    return T5Tokenizer(vocab=pieces, extra_ids=0)


def clip_text_model(vocab_size, with_projection=False):
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    cfg = CLIPTextConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=77, projection_dim=32, bos_token_id=0,
                         eos_token_id=1, pad_token_id=1)
    return (CLIPTextModelWithProjection if with_projection else CLIPTextModel)(cfg)


def build_flux(save_dir: str, seed: int = 0) -> str:
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(seed)
    clip_tok, t5_tok = clip_tokenizer(), t5_tokenizer()
    pipe = FluxPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=AutoencoderKL(sample_size=32, in_channels=3, out_channels=3, block_out_channels=(4,), layers_per_block=1,
                          latent_channels=1, norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False,
                          shift_factor=0.0609, scaling_factor=1.5035),
        text_encoder=clip_text_model(len(clip_tok)), tokenizer=clip_tok,
        text_encoder_2=T5EncoderModel(T5Config(vocab_size=len(t5_tok), d_model=32, d_kv=8, d_ff=37, num_layers=2,
                                               num_heads=4, relative_attention_num_buckets=8)),
        tokenizer_2=t5_tok,
        # 4 heads and FFN widths divisible by 4: tensor-parallel over 2 or 4 ranks (examples/hf_diffusers_tp.py)
        transformer=FluxTransformer2DModel(patch_size=1, in_channels=4, num_layers=2, num_single_layers=2,
                                           attention_head_dim=8, num_attention_heads=4, joint_attention_dim=32,
                                           pooled_projection_dim=32, axes_dims_rope=[2, 2, 4]),
    )
    pipe.save_pretrained(save_dir)
    return save_dir


def build_unet_pipeline(save_dir: str, seed: int = 0) -> str:
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionPipeline, UNet2DConditionModel

    torch.manual_seed(seed)
    tok = clip_tokenizer()
    pipe = StableDiffusionPipeline(
        vae=AutoencoderKL(block_out_channels=(4, 8), in_channels=3, out_channels=3, latent_channels=4,
                          down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                          norm_num_groups=2, sample_size=32),
        text_encoder=clip_text_model(len(tok)), tokenizer=tok,
        unet=UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=16, in_channels=4,
                                  out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                  up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=32,
                                  norm_num_groups=4, attention_head_dim=4),
        scheduler=EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                         steps_offset=1),
        safety_checker=None, feature_extractor=None, requires_safety_checker=False,
    )
    pipe.save_pretrained(save_dir)
    return save_dir


# ---- running --------------------------------------------------------------------------------------------------
def load(kind: str, path: str, device: str, dtype=torch.float32):
    from diffusers import FluxPipeline, StableDiffusionPipeline

    cls = FluxPipeline if kind == "flux" else StableDiffusionPipeline
    pipe = cls.from_pretrained(path, dtype=dtype).to(device)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def denoiser(pipe):
    return pipe.transformer if hasattr(pipe, "transformer") and pipe.transformer is not None else pipe.unet


def generate(pipe, kind: str, size: int, steps: int, seed: int = 0) -> np.ndarray:
    kwargs = dict(height=size, width=size, num_inference_steps=steps, output_type="np",
                  generator=torch.Generator("cpu").manual_seed(seed))
    if kind == "flux":
        kwargs.update(guidance_scale=3.5, max_sequence_length=16)
    else:
        kwargs.update(guidance_scale=5.0)  # classifier-free guidance: batch of 2 through the UNet
    with torch.no_grad():
        return pipe(PROMPT, **kwargs).images


def neuron_compile_available() -> bool:
    return "neuron" in torch._dynamo.list_backends()


def run(kind: str, path: str, size: int, steps: int, compile_: bool, atol: float) -> dict:
    ref = generate(load(kind, path, "cpu"), kind, size, steps)
    out = {"cpu_mean": float(ref.mean())}
    pipe = load(kind, path, "neuron")
    assert denoiser(pipe).device.type == "neuron"
    img = generate(pipe, kind, size, steps)
    out["eager"] = float(np.abs(img - ref).max())
    print(f"[{kind}] image {img.shape} eager on neuron vs CPU: max|diff| {out['eager']:.2e}")
    assert img.shape == ref.shape and out["eager"] <= atol, (kind, out)
    if compile_:
        # the user's one line: compile the denoiser with the neuron backend (static shapes)
        denoiser(pipe).compile(backend="neuron", dynamic=False)
        img = generate(pipe, kind, size, steps)
        out["compiled"] = float(np.abs(img - ref).max())
        print(f"[{kind}] compiled (backend='neuron') vs CPU: max|diff| {out['compiled']:.2e}")
        assert out["compiled"] <= atol, (kind, out)
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pipelines", default="flux,unet")
    p.add_argument("--size", type=int, default=32, help="image height and width")
    p.add_argument("--steps", type=int, default=2, help="denoising steps")
    p.add_argument("--compile", action="store_true", help="fail if the compiled run is not available")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--atol", type=float, default=1e-4, help="image tolerance (pixel values in [0, 1])")
    args = p.parse_args(argv)

    compile_ = not args.no_compile and neuron_compile_available()
    if args.compile and not compile_:
        raise SystemExit("--compile: torch.compile backend 'neuron' is not registered")
    results = {}
    for kind in args.pipelines.split(","):
        build = build_flux if kind == "flux" else build_unet_pipeline
        path = build(tempfile.mkdtemp(prefix=f"tiny-{kind}-"))
        results[kind] = run(kind, path, args.size, args.steps, compile_, args.atol)
    return results


if __name__ == "__main__":
    main()
