"""Recipes: how to build each pipeline class from tiny components, and how to call it.

A recipe builds the pipeline's components (components.py, under a fixed seed: the same weights every
time) and names what its call needs beyond the common inputs (inputs.py: prompt, two steps, a seeded CPU
generator, a small image, a mask, ...). Written for Diffusers 0.42 (DIFFUSERS_WRITTEN_FOR): another
version may rename components or inputs, and the worker says so.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from . import components as C

DIFFUSERS_WRITTEN_FOR = "0.42"


@dataclasses.dataclass(frozen=True)
class Recipe:
    components: Callable[[], dict]
    call: dict = dataclasses.field(default_factory=dict)  # call arguments beyond the common inputs
    size: int = 32  # image height and width (pixels)
    method: str = "__call__"  # what generates: a pipeline without __call__ dispatches to methods (Versatile Diffusion)
    on_device: tuple[str, ...] = ()  # call arguments the pipeline does not move to its device itself (GLM-Image's ids)


# ---- component sets, by family ------------------------------------------------------------------------------

def _sd(in_channels: int = 4, scheduler=C.ddim, controlnet: bool = False, adapter: bool = False,
        **unet) -> Callable[[], dict]:
    def build() -> dict:
        tok = C.clip_tokenizer()
        out = {"unet": C.sd_unet(in_channels=in_channels, **unet), "vae": C.vae_kl(), "scheduler": scheduler(),
               "text_encoder": C.clip_text(tok), "tokenizer": tok}
        if controlnet:
            out["controlnet"] = C.controlnet_for(C.sd_unet(**unet))
        if adapter:  # one feature map per UNet block, each as large as that block's input (the VAE halves the image)
            out["adapter"] = C.t2i_adapter((8, 16), downscale_factor=2)
        return out
    return build


def _sdxl(in_channels: int = 4, controlnet: bool = False, union: bool = False, adapter: bool = False
          ) -> Callable[[], dict]:
    def build() -> dict:
        tok, tok2 = C.clip_tokenizer(), C.clip_tokenizer()
        out = {"unet": C.sdxl_unet(in_channels=in_channels), "vae": C.vae_kl(), "scheduler": C.euler(),
               "text_encoder": C.clip_text(tok), "tokenizer": tok,
               "text_encoder_2": C.clip_text(tok2, with_projection=True), "tokenizer_2": tok2}
        if controlnet:
            out["controlnet"] = C.controlnet_for(C.sdxl_unet())
        if union:
            out["controlnet"] = C.sdxl_controlnet_union()
        if adapter:  # features at the first block's output (after its downsampling): a quarter of the image
            out["adapter"] = C.t2i_adapter((8, 16), downscale_factor=4, adapter_type="full_adapter_xl")
        return out
    return build


def _kolors() -> dict:
    """Kolors: SDXL's UNet conditioned on ChatGLM3 (as the released model: its hidden states projected to the
    cross-attention width by text_proj, its last token's final state the pooled embedding)."""
    tok = C.chatglm_tokenizer()
    return {"unet": C.sdxl_unet(encoder_hid_dim_type="text_proj", encoder_hid_dim=C.TEXT_DIM), "vae": C.vae_kl(),
            "scheduler": C.euler(), "text_encoder": C.chatglm(tok), "tokenizer": tok, "image_encoder": None,
            "feature_extractor": None}


def _unconditional(scheduler: str) -> Callable[[], dict]:
    def build() -> dict:
        import diffusers
        return {"unet": C.unet_2d(), "scheduler": getattr(diffusers, scheduler)()}
    return build


def _flux(in_channels: int = 4, out_channels: int | None = None, latent_channels: int = 1,
          controlnet_channels: int | None = None) -> Callable[[], dict]:
    """Flux's components; a latent channel packs into 4 transformer channels (2x2 patches)."""
    def build() -> dict:
        tok, tok2 = C.clip_tokenizer(), C.t5_tokenizer()
        out = {"transformer": C.flux_transformer(in_channels, out_channels), "vae": C.vae_flux(latent_channels),
               "scheduler": C.flow_match(), "text_encoder": C.clip_text(tok, with_projection=False),
               "tokenizer": tok, "text_encoder_2": C.t5_encoder(tok2), "tokenizer_2": tok2}
        if controlnet_channels:
            out["controlnet"] = C.flux_controlnet(controlnet_channels)
        return out
    return build


def _sd3(latent_channels: int = 4, controlnet: dict | None = None) -> Callable[[], dict]:
    """SD3's components; controlnet: an SD3 ControlNet with these extra arguments."""
    def build() -> dict:
        tok, tok2, tok3 = C.clip_tokenizer(), C.clip_tokenizer(), C.t5_tokenizer()
        out = {"transformer": C.sd3_transformer(latent_channels),
               "vae": C.vae_kl(latent_channels=latent_channels, blocks=(4,), shift_factor=0.0609,
                               scaling_factor=1.5035),
               "scheduler": C.flow_match(),
               "text_encoder": C.clip_text(tok, with_projection=True), "tokenizer": tok,
               "text_encoder_2": C.clip_text(tok2, with_projection=True), "tokenizer_2": tok2,
               "text_encoder_3": C.t5_encoder(tok3), "tokenizer_3": tok3}
        if controlnet is not None:
            out["controlnet"] = C.sd3_controlnet(latent_channels, **controlnet)
        return out
    return build


def _t5_text(umt5: bool = False) -> dict:
    tok = C.t5_tokenizer()
    return {"text_encoder": C.t5_encoder(tok, umt5=umt5), "tokenizer": tok}


def _t5(transformer: Callable, vae: Callable, scheduler: Callable, umt5: bool = False) -> Callable[[], dict]:
    """A denoiser conditioned on one T5 (or UMT5) encoder: PixArt, Latte, Wan, LTX, CogVideoX, Mochi, ..."""
    def build() -> dict:
        return {"transformer": transformer(), "vae": vae(), "scheduler": scheduler(), **_t5_text(umt5)}
    return build


def _scheduler(name: str, **kw) -> Callable:
    def make():
        import diffusers
        return getattr(diffusers, name)(**kw)
    return make


def _kandinsky22(in_channels: int = 4, hint: bool = False) -> Callable[[], dict]:
    def build() -> dict:
        from diffusers import DDIMScheduler
        # a control hint is embedded 8 times smaller than the image: so are the latents (a 4-block MoVQ)
        return {"unet": C.kandinsky_unet(in_channels, "image_hint" if hint else "image"),
                "movq": C.movq(4 if hint else 2),
                "scheduler": DDIMScheduler(beta_schedule="linear", beta_start=0.00085, beta_end=0.012,
                                           clip_sample=False, set_alpha_to_one=False, steps_offset=1)}
    return build


def _kandinsky21(in_channels: int = 4) -> Callable[[], dict]:
    def build() -> dict:
        from diffusers import DDIMScheduler
        tok = C.xlm_roberta_tokenizer()
        return {"unet": C.kandinsky21_unet(in_channels), "movq": C.movq(), "text_encoder": C.multilingual_clip(tok),
                "tokenizer": tok,
                "scheduler": DDIMScheduler(num_train_timesteps=1000, beta_schedule="linear", beta_start=0.00085,
                                           beta_end=0.012, clip_sample=False, set_alpha_to_one=False, steps_offset=1,
                                           prediction_type="epsilon", thresholding=False)}
    return build


def _kandinsky21_combined(in_channels: int = 4) -> Callable[[], dict]:
    def build() -> dict:
        return _kandinsky21(in_channels)() | {f"prior_{k}": v for k, v in _kandinsky22_prior().items()}
    return build


def _kandinsky3() -> dict:
    from diffusers import DDPMScheduler
    tok = C.t5_tokenizer()
    return {"unet": C.kandinsky3_unet(), "movq": C.movq(), "text_encoder": C.t5_encoder(tok), "tokenizer": tok,
            "scheduler": DDPMScheduler(beta_start=0.00085, beta_end=0.012, steps_offset=1,
                                       beta_schedule="squaredcos_cap_v2", clip_sample=True, thresholding=False)}


def _lumina(transformer: Callable, text_encoder: Callable) -> Callable[[], dict]:
    def build() -> dict:
        tok = C.gemma_tokenizer()
        vae = C.vae_kl(blocks=(4,), shift_factor=0.0609, scaling_factor=1.5035)  # Lumina 2 reads the shift
        return {"transformer": transformer(), "vae": vae, "scheduler": C.flow_match(),
                "text_encoder": text_encoder(tok), "tokenizer": tok}
    return build


def _animatediff() -> dict:
    return _sd(scheduler=_scheduler("DDIMScheduler", beta_start=0.00085, beta_end=0.012, beta_schedule="linear",
                                    clip_sample=False))() | {"motion_adapter": C.motion_adapter()}


def _cascade_prior() -> dict:
    from diffusers import DDPMWuerstchenScheduler
    tok = C.clip_tokenizer()
    return {"prior": C.cascade_prior(), "text_encoder": C.clip_text(tok, with_projection=True), "tokenizer": tok,
            "scheduler": DDPMWuerstchenScheduler()}


def _cascade_decoder() -> dict:
    from diffusers import DDPMWuerstchenScheduler
    tok = C.clip_tokenizer()
    return {"decoder": C.cascade_decoder(), "vqgan": C.paella_vq(), "text_encoder": C.clip_text(tok, with_projection=True),
            "tokenizer": tok, "scheduler": DDPMWuerstchenScheduler()}


def _wan_i2v() -> dict:
    image_encoder, image_processor = C.clip_vision()
    return _t5(lambda: C.wan_transformer(in_channels=36, image_dim=4), C.wan_vae,
               _scheduler("FlowMatchEulerDiscreteScheduler", shift=7.0), umt5=True)() | {
        "image_encoder": image_encoder, "image_processor": image_processor}


def _wan_like(transformer: Callable, scheduler: Callable | None = None, image_encoder: dict | None = None
              ) -> Callable[[], dict]:
    """Wan's components around another transformer (VACE, Animate, SkyReels-V2); image_encoder: CLIP vision sizes."""
    def build() -> dict:
        out = _t5(transformer, C.wan_vae, scheduler or _scheduler("FlowMatchEulerDiscreteScheduler", shift=7.0),
                  umt5=True)()
        if image_encoder is not None:
            out["image_encoder"], out["image_processor"] = C.clip_vision(**image_encoder)
        return out
    return build


def _video_tensor(seed: int, frames: int, size: int) -> Callable:
    """A (1, 3, frames, size, size) video in [0, 1], the same on every call."""
    def make():
        import torch
        return torch.rand(1, 3, frames, size, size, generator=torch.Generator().manual_seed(seed))
    return make


def _mask_video(frames: int, size: int) -> Callable:
    """A (1, 1, frames, size, size) mask, the centre square 1 in every frame."""
    def make():
        import torch
        mask = torch.zeros(1, 1, frames, size, size)
        mask[..., size // 4: 3 * size // 4, size // 4: 3 * size // 4] = 1.0
        return mask
    return make


def _pil_masks(count: int, size: int) -> Callable:
    """`count` masks (PIL, mode L): the centre square white, as inputs.py's mask."""
    def make():
        from .inputs import _image
        return [_image("mask", size) for _ in range(count)]
    return make


def _skyreels_scheduler(shift: float) -> Callable:
    return _scheduler("UniPCMultistepScheduler", flow_shift=shift, use_flow_sigmas=True)


def _text_to_video_sd() -> dict:
    return _sd()() | {"unet": C.unet_3d()}


def _image_variation() -> dict:
    image_encoder, feature_extractor = C.clip_vision(image_size=32, hidden=C.TEXT_DIM, patch_size=4)
    return {"unet": C.sd_unet(), "vae": C.vae_kl(), "scheduler": C.ddim(), "image_encoder": image_encoder,
            "feature_extractor": feature_extractor}


def _sd_upscale() -> dict:
    from diffusers import DDIMScheduler, DDPMScheduler
    return _sd()() | {"unet": C.sd_upscale_unet(), "vae": C.vae_kl(blocks=(4, 8, 8)),  # 4x: three VAE blocks
                      "low_res_scheduler": DDPMScheduler(), "scheduler": DDIMScheduler(prediction_type="v_prediction"),
                      "max_noise_level": 350}


def _sd_latent_upscale() -> dict:
    from diffusers import EulerDiscreteScheduler
    return _sd()() | {"unet": C.sd_latent_upscale_unet(), "scheduler": EulerDiscreteScheduler(prediction_type="sample")}


def _i2vgenxl() -> dict:
    image_encoder, feature_extractor = C.clip_vision(image_size=32, hidden=C.TEXT_DIM, patch_size=4)
    return _sd()() | {"unet": C.i2vgenxl_unet(), "image_encoder": image_encoder, "feature_extractor": feature_extractor}


def _ldm() -> dict:
    return {"vqvae": C.vq_model(), "unet": C.unet_2d(in_channels=3, sample_size=8), "scheduler": C.ddim()}


def _ldm_super_resolution() -> dict:
    from diffusers import UNet2DModel
    unet = UNet2DModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=16, in_channels=6, out_channels=3,
                       norm_num_groups=4, down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"))
    return {"vqvae": C.vq_model(), "unet": unet, "scheduler": C.ddim()}


def _tensor(seed: int, *shape: int) -> Callable:
    """A seeded standard-normal tensor, the same on every call."""
    def make():
        import torch
        return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return make


def _audio_diffusion() -> dict:
    """A mel spectrogram (32 x 32, one channel) denoised in a VAE's 16 x 16 latent, as Diffusers' old test did
    (audio_diffusion/test_audio_diffusion.py, removed when the pipeline was deprecated)."""
    from diffusers import DDIMScheduler, Mel, UNet2DModel
    vqvae = C.vae_spectrogram()
    unet = UNet2DModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=(16, 16), in_channels=1,
                       out_channels=1, norm_num_groups=4, down_block_types=("AttnDownBlock2D", "DownBlock2D"),
                       up_block_types=("UpBlock2D", "AttnUpBlock2D"))
    return {"vqvae": vqvae, "unet": unet, "mel": Mel(x_res=32, y_res=32, n_fft=256, hop_length=64, n_iter=4),
            "scheduler": DDIMScheduler()}


def _spectrogram_diffusion() -> dict:
    """MIDI note tokens to a mel spectrogram (256 frames x 128 bins, fixed by the pipeline), at Diffusers' old
    test's shape (spectrogram_diffusion/test_spectrogram_diffusion.py) with widths of 32; no MelGAN (an ONNX
    model): the mel is the output."""
    from diffusers import DDPMScheduler
    from diffusers.pipelines.deprecated.spectrogram_diffusion import (SpectrogramContEncoder, SpectrogramNotesEncoder,
                                                                      T5FilmDecoder)
    t5 = dict(d_model=32, dropout_rate=0.1, num_layers=1, num_heads=1, d_kv=4, d_ff=37)
    return {"notes_encoder": SpectrogramNotesEncoder(max_length=_NOTE_TOKENS, vocab_size=1536,
                                                     feed_forward_proj="gated-gelu", **t5).eval(),
            "continuous_encoder": SpectrogramContEncoder(input_dims=128, targets_context_length=256,
                                                         feed_forward_proj="gated-gelu", **t5).eval(),
            "decoder": T5FilmDecoder(input_dims=128, targets_length=256, max_decoder_noise_time=20000.0, **t5).eval(),
            "scheduler": DDPMScheduler(), "melgan": None}


_NOTE_TOKENS = 32  # one chunk of note tokens: the test's first 15 (program, velocity, note on/off, time shifts), padded
_SPECTROGRAM_CALL = {"input_tokens": [[1134, 90, 1135, 1133, 1080, 112, 1132, 1080, 1133, 1079, 133, 1132, 1079, 1133,
                                       1] + [0] * (_NOTE_TOKENS - 15)], "output_type": "mel"}


def _audioldm() -> dict:
    tok = C.roberta_tokenizer()
    return {"unet": C.audioldm_unet(), "vae": C.vae_audio(), "scheduler": C.ddim(), "text_encoder": C.clap_text(tok),
            "tokenizer": tok, "vocoder": C.hifigan()}


def _musicldm() -> dict:
    tok = C.roberta_tokenizer()
    return {"unet": C.audioldm_unet(16), "vae": C.vae_audio(), "scheduler": C.ddim(), "text_encoder": C.clap(tok),
            "tokenizer": tok, "feature_extractor": C.clap_feature_extractor(), "vocoder": C.hifigan()}


def _audioldm2() -> dict:
    from diffusers import AudioLDM2ProjectionModel
    tok, tok2 = C.roberta_tokenizer(), C.t5_tokenizer()
    return {"unet": C.audioldm2_unet(), "vae": C.vae_audio(), "scheduler": C.ddim(), "text_encoder": C.clap(tok),
            "tokenizer": tok, "feature_extractor": C.clap_feature_extractor(), "text_encoder_2": C.t5_encoder(tok2),
            "tokenizer_2": tok2, "language_model": C.gpt2_lm(),
            "projection_model": AudioLDM2ProjectionModel(text_encoder_dim=16, text_encoder_1_dim=C.TEXT_DIM,
                                                         langauge_model_dim=16),
            "vocoder": C.hifigan()}


def _svd() -> dict:
    from diffusers import AutoencoderKLTemporalDecoder, EulerDiscreteScheduler
    # the pipeline resizes the image to 224 pixels itself before the encoder
    image_encoder, feature_extractor = C.clip_vision(image_size=224, hidden=32, patch_size=14)
    return {"unet": C.svd_unet(), "image_encoder": image_encoder, "feature_extractor": feature_extractor,
            "vae": AutoencoderKLTemporalDecoder(block_out_channels=[32, 64], in_channels=3, out_channels=3,
                                                down_block_types=["DownEncoderBlock2D"] * 2, latent_channels=4),
            "scheduler": EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                                interpolation_type="linear", prediction_type="v_prediction",
                                                sigma_max=700.0, sigma_min=0.002, steps_offset=1,
                                                timestep_spacing="leading", timestep_type="continuous",
                                                use_karras_sigmas=True)}


def _deepfloyd_if(super_resolution: bool = False) -> Callable[[], dict]:
    def build() -> dict:
        from diffusers import DDPMScheduler
        from diffusers.pipelines.deepfloyd_if.watermark import IFWatermarker
        tok = C.t5_tokenizer()
        out = {"unet": C.if_unet(super_resolution), "text_encoder": C.t5_encoder(tok), "tokenizer": tok,
               "watermarker": IFWatermarker(),
               "scheduler": DDPMScheduler(num_train_timesteps=1000, beta_schedule="squaredcos_cap_v2", beta_start=0.0001,
                                          beta_end=0.02, thresholding=True, dynamic_thresholding_ratio=0.95,
                                          sample_max_value=1.0, prediction_type="epsilon",
                                          variance_type="learned_range")}
        if super_resolution:
            out["image_noising_scheduler"] = DDPMScheduler(num_train_timesteps=1000, beta_schedule="squaredcos_cap_v2",
                                                           beta_start=0.0001, beta_end=0.02)
        return out
    return build


def _stable_unclip_denoiser() -> dict:
    from diffusers import DDIMScheduler, DDPMScheduler
    from diffusers.pipelines.stable_diffusion.stable_unclip_image_normalizer import StableUnCLIPImageNormalizer
    tok = C.clip_tokenizer()
    return {"image_normalizer": StableUnCLIPImageNormalizer(embedding_dim=C.TEXT_DIM),
            "image_noising_scheduler": DDPMScheduler(beta_schedule="squaredcos_cap_v2"), "tokenizer": tok,
            "text_encoder": C.clip_text(tok), "unet": C.unclip_unet(), "vae": C.vae_kl(),
            "scheduler": DDIMScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012,
                                       prediction_type="v_prediction", set_alpha_to_one=False, steps_offset=1)}


def _stable_unclip() -> dict:
    from diffusers import DDPMScheduler
    tok = C.clip_tokenizer()
    return _stable_unclip_denoiser() | {
        "prior_tokenizer": tok, "prior_text_encoder": C.clip_text(tok, with_projection=True),
        "prior": C.prior_transformer(),
        "prior_scheduler": DDPMScheduler(variance_type="fixed_small_log", prediction_type="sample",
                                         num_train_timesteps=1000, clip_sample=True, clip_sample_range=5.0,
                                         beta_schedule="squaredcos_cap_v2")}


def _stable_unclip_img2img() -> dict:
    image_encoder, feature_extractor = C.clip_vision(image_size=32, hidden=C.TEXT_DIM, patch_size=4)
    return _stable_unclip_denoiser() | {"image_encoder": image_encoder, "feature_extractor": feature_extractor}


def _wuerstchen_prior() -> dict:
    from diffusers import DDPMWuerstchenScheduler
    tok = C.clip_tokenizer()
    return {"prior": C.wuerstchen_prior(), "text_encoder": C.clip_text(tok), "tokenizer": tok,
            "scheduler": DDPMWuerstchenScheduler()}


def _wuerstchen_decoder() -> dict:
    from diffusers import DDPMWuerstchenScheduler
    tok = C.clip_tokenizer()
    return {"decoder": C.wuerstchen_decoder(), "vqgan": C.paella_vq(), "text_encoder": C.clip_text(tok),
            "tokenizer": tok, "scheduler": DDPMWuerstchenScheduler()}


def _wuerstchen_combined() -> dict:
    return _wuerstchen_decoder() | {f"prior_{k}": v for k, v in _wuerstchen_prior().items()}


def _controlnet_xs(sdxl: bool = False) -> Callable[[], dict]:
    def build() -> dict:
        from diffusers import ControlNetXSAdapter
        out = _sdxl()() if sdxl else _sd()()
        # ControlNet-XS pairs each UNet resnet with its own: it is written for two per block (three going up)
        out["unet"] = C.sdxl_unet(layers_per_block=2) if sdxl else C.sd_unet(layers_per_block=2)
        out["controlnet"] = ControlNetXSAdapter.from_unet(out["unet"], size_ratio=1, learn_time_embedding=True,
                                                          conditioning_embedding_out_channels=(4, 8))
        return out
    return build


def _gligen_text_image() -> dict:
    from transformers import CLIPProcessor
    from diffusers.pipelines.stable_diffusion import CLIPImageProjection
    image_encoder, image_processor = C.clip_vision(image_size=32, hidden=C.TEXT_DIM, patch_size=4)
    out = _sd(attention_type="gated-text-image")()
    return out | {"image_encoder": image_encoder, "image_project": CLIPImageProjection(hidden_size=C.TEXT_DIM),
                  "processor": CLIPProcessor(image_processor=image_processor, tokenizer=out["tokenizer"])}


def _paint_by_example() -> dict:
    image_encoder, feature_extractor = C.paint_by_example_encoder()
    out = _sd(in_channels=9)()
    del out["text_encoder"], out["tokenizer"]
    return out | {"image_encoder": image_encoder, "feature_extractor": feature_extractor}


def _ldm_text_to_image() -> dict:
    tok = C.bert_tokenizer()
    return {"vqvae": C.vae_kl(), "bert": C.ldm_bert(tok), "tokenizer": tok, "unet": C.sd_unet(), "scheduler": C.ddim()}


def _ltx2() -> dict:
    tok = C.gemma_tokenizer()
    return {"transformer": C.ltx2_transformer(), "vae": C.ltx2_vae(), "audio_vae": C.ltx2_audio_vae(),
            "scheduler": C.flow_match(), "text_encoder": C.gemma3(tok, hidden=32), "tokenizer": tok,
            "connectors": C.ltx2_connectors(), "vocoder": C.ltx2_vocoder()}


# LTX-2's sampling knobs pinned as Diffusers' tests pin them (no STG, no modality guidance, no rescale)
_LTX2_CALL = {"max_sequence_length": 16, "num_frames": 5, "frame_rate": 25.0, "guidance_scale": 1.0, "stg_scale": 0.0,
              "modality_scale": 1.0, "guidance_rescale": 0.0, "audio_guidance_scale": 1.0, "audio_stg_scale": 0.0,
              "audio_modality_scale": 1.0, "audio_guidance_rescale": 0.0, "spatio_temporal_guidance_blocks": None,
              "use_cross_timestep": False}


def _ltx2_condition(kind: str) -> Callable:
    """An LTX-2 condition on a seeded 32-pixel frame (frames as a float tensor: no H.264 re-compression)."""
    def make():
        import torch
        from diffusers.pipelines import ltx2
        frames = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(7))
        if kind == "hdr":
            return ltx2.LTX2HDRReferenceCondition(frames=frames, strength=1.0)
        return ltx2.LTX2VideoCondition(frames=frames, index=0, strength=1.0, crf=0)
    return make


def _protein(name: str, tokens: int = 8) -> Callable:
    """One of RFD4-Proteína's prepared inputs for a seeded random molecule of `tokens` residues: every token real,
    designed (none given as context) and latent-carrying; the atom annotations (hydrogen bonds, pi stacking, salt
    bridges...) and bond path lengths random codes, the rest (one molecule, one entity, no nucleic acid) zeros."""
    def make():
        import torch
        g = torch.Generator().manual_seed(11)
        n = tokens
        zeros = lambda *shape, dtype=torch.long: torch.zeros(1, *shape, dtype=dtype)
        features = {"condition_sequence_1_residue": zeros(n), "molecule_iid": zeros(n),
                    "molecule_entity_id": zeros(n), "condition_index-group_1_token": zeros(n),
                    **{f"condition_{kind}_1_atom": torch.randint(0, 4, (1, n, 37), generator=g)
                       for kind in ("hbond", "pistack", "pication", "saltbridge", "hydrophobic", "metal-coord")},
                    "charge": zeros(n, 37), "element": zeros(n, 37),
                    "token_bond_path_length": torch.randint(0, 5, (1, n, n), generator=g),
                    "na_ss_state": zeros(n), "na_ss_state_mask": zeros(n, dtype=torch.bool),
                    "na_ss_pair": zeros(n, n), "na_ss_pair_mask": zeros(n, n, dtype=torch.bool)}
        inputs = {"padding_mask": torch.ones(1, n, dtype=torch.bool),
                  "is_in_context_conditioning": zeros(n, dtype=torch.bool),
                  "supports_local_latent": torch.ones(1, n, dtype=torch.bool),
                  "token_type": torch.randint(0, 7, (1, n), generator=g),
                  "atom37_mask": torch.rand(1, n, 37, generator=g) < 0.5, "conditioning_features": features}
        return inputs[name]
    return make


def _sana_wm() -> dict:
    tok, vae = C.gemma_tokenizer(), C.ltx2_vae()
    return {"tokenizer": tok, "text_encoder": C.gemma2_text(tok), "vae": vae,
            "transformer": C.sana_wm_transformer(vae.temporal_compression_ratio), "scheduler": C.flow_match()}


def _camera_path(frames: int) -> Callable:
    """Seeded camera-to-world poses `(frames, 4, 4)` (OpenCV convention, as SANA-WM's): a random yaw and a random
    translation of at most 0.1 per frame, a rigid transform each (rotation orthonormal, last row 0 0 0 1)."""
    def make():
        import numpy as np
        rng = np.random.default_rng(5)
        yaw, shift = rng.uniform(-0.2, 0.2, frames), rng.uniform(-0.1, 0.1, (frames, 3))
        poses = np.tile(np.eye(4, dtype=np.float32), (frames, 1, 1))
        poses[:, 0, 0] = poses[:, 2, 2] = np.cos(yaw)
        poses[:, 0, 2], poses[:, 2, 0] = np.sin(yaw), -np.sin(yaw)
        poses[:, :3, 3] = np.cumsum(shift, axis=0)
        return poses
    return make


def _marigold(in_channels: int, out_channels: int, **config) -> Callable[[], dict]:
    """Marigold: an SD UNet fine-tuned to predict depth/normals/intrinsics latents from the image's latents."""
    def build() -> dict:
        tok = C.clip_tokenizer()
        return {"unet": C.sd_unet(in_channels=in_channels, out_channels=out_channels), "vae": C.vae_kl(),
                "scheduler": C.lcm(), "text_encoder": C.clip_text(tok), "tokenizer": tok, **config}
    return build


def _hunyuan_video() -> dict:
    tok, tok2 = C.qwen2_tokenizer(), C.clip_tokenizer()
    return {"transformer": C.hunyuan_video_transformer(), "vae": C.hunyuan_video_vae(),
            "scheduler": _scheduler("FlowMatchEulerDiscreteScheduler", shift=7.0)(),
            "text_encoder": C.llama_text(tok), "tokenizer": tok,
            "text_encoder_2": C.clip_text(tok2, hidden=8), "tokenizer_2": tok2}


def _hunyuan_video_i2v() -> dict:
    """HunyuanVideo image to video: LLaVA reads the prompt and the image; the image's latents and a mask join the
    noise (9 channels)."""
    from transformers import CLIPImageProcessor
    out = _hunyuan_video()
    return out | {"transformer": C.hunyuan_video_transformer(in_channels=9, guidance_embeds=False,
                                                              image_condition_type="latent_concat"),
                  "text_encoder": C.llava(out["tokenizer"]), "image_processor": CLIPImageProcessor(crop_size=224,
                                                                                                   size=224)}


def _hunyuan_framepack() -> dict:
    image_encoder, feature_extractor = C.siglip_vision()
    return _hunyuan_video() | {"transformer": C.hunyuan_framepack_transformer(), "image_encoder": image_encoder,
                               "feature_extractor": feature_extractor}


def _token_ids(seed: int, high: int, *shape: int) -> Callable:
    """Seeded token ids in [0, high), the same on every call."""
    def make():
        import torch
        return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))
    return make


def _ones(*shape: int) -> Callable:
    def make():
        import torch
        return torch.ones(shape)
    return make


def _embedding(seed: int) -> Callable:
    """A CLIP image embedding (1, TEXT_DIM), the same on every call (Kandinsky's decoders take it, not text)."""
    def make():
        import torch
        return torch.randn(1, C.TEXT_DIM, generator=torch.Generator().manual_seed(seed))
    return make


def _image_tensor(seed: int, channels: int, size: int) -> Callable:
    """A (1, channels, size, size) tensor in [0, 1], the same on every call (inputs the pipeline takes as tensors)."""
    def make():
        import torch
        return torch.rand(1, channels, size, size, generator=torch.Generator().manual_seed(seed))
    return make


def _pil_image(size: int) -> Callable:
    """A seeded RGB image (PIL) of `size` pixels, where a pipeline's image differs in size from its output."""
    def make():
        from .inputs import _image
        return _image("rgb", size)
    return make


def _pil_frames(count: int, size: int) -> Callable:
    """`count` seeded RGB frames (PIL), the same on every call: control frames of the video pipelines."""
    def make():
        import numpy as np
        from PIL import Image
        rng = np.random.default_rng(4)
        return [Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8), mode="RGB")
                for _ in range(count)]
    return make


def _animatediff_with(controlnet: Callable | None = None, **extra) -> Callable[[], dict]:
    def build() -> dict:
        out = _animatediff() | extra
        if controlnet is not None:
            out["controlnet"] = controlnet()
        return out
    return build


def _animatediff_sdxl() -> dict:
    return _sdxl()() | {"motion_adapter": C.motion_adapter(use_motion_mid_block=False),
                        "scheduler": _scheduler("DDIMScheduler", beta_start=0.00085, beta_end=0.012,
                                                beta_schedule="linear", clip_sample=False)()}


def _cascade_combined() -> dict:
    prior = _cascade_prior()
    return _cascade_decoder() | {f"prior_{'prior' if k == 'prior' else k}": v for k, v in prior.items()}


def _kandinsky22_prior() -> dict:
    from diffusers import UnCLIPScheduler
    tok = C.clip_tokenizer()
    image_encoder, image_processor = C.clip_vision(image_size=32, hidden=C.TEXT_DIM, patch_size=4)
    return {"prior": C.prior_transformer(), "image_encoder": image_encoder, "image_processor": image_processor,
            "text_encoder": C.clip_text(tok, with_projection=True), "tokenizer": tok,
            "scheduler": UnCLIPScheduler(variance_type="fixed_small_log", prediction_type="sample",
                                         num_train_timesteps=1000, clip_sample=True, clip_sample_range=10.0)}


def _kandinsky22_combined(in_channels: int = 4) -> Callable[[], dict]:
    def build() -> dict:
        return _kandinsky22(in_channels)() | {f"prior_{k}": v for k, v in _kandinsky22_prior().items()}
    return build


def _hunyuandit() -> dict:
    from diffusers import DDPMScheduler
    tok, tok2 = C.bert_tokenizer(), C.t5_tokenizer()
    return {"transformer": C.hunyuandit_transformer(), "vae": C.vae_kl(blocks=(4,)), "scheduler": DDPMScheduler(),
            "text_encoder": C.bert_text(tok), "tokenizer": tok, "text_encoder_2": C.t5_encoder(tok2),
            "tokenizer_2": tok2}


def _sana() -> dict:
    tok = C.gemma_tokenizer()
    return {"transformer": C.sana_transformer(), "vae": C.vae_dc(), "text_encoder": C.gemma2_text(tok),
            "tokenizer": tok, "scheduler": C.flow_match()}


def _sana_sprint() -> dict:
    from diffusers import SCMScheduler
    return _sana() | {"transformer": C.sana_transformer(qk_norm="rms_norm_across_heads", guidance_embeds=True),
                      "scheduler": SCMScheduler()}


def _qwenimage() -> dict:
    tok = C.qwen2_tokenizer()
    return {"transformer": C.qwenimage_transformer(), "vae": C.qwenimage_vae(), "scheduler": C.flow_match(),
            "text_encoder": C.qwen25_vl(tok), "tokenizer": tok}


def _kandinsky5(video: bool) -> Callable[[], dict]:
    """Kandinsky 5: Qwen2.5-VL and CLIP text encoders. The text-only pipelines are given Qwen's tokenizer where they
    take a Qwen2VLProcessor: for a prompt without images the processor only tokenizes (and it cannot be made here,
    see _QWEN_VL_PROCESSOR)."""
    def build() -> dict:
        from diffusers import AutoencoderKL
        tok, tok2 = C.qwen2_chat_tokenizer(), C.clip_tokenizer()
        if video:
            vae = C.hunyuan_video_vae_16()
        else:
            vae = AutoencoderKL(act_fn="silu", block_out_channels=[32, 64], down_block_types=["DownEncoderBlock2D"] * 2,
                                force_upcast=True, in_channels=3, latent_channels=16, layers_per_block=1,
                                mid_block_add_attention=False, norm_num_groups=32, out_channels=3, sample_size=128,
                                scaling_factor=0.3611, shift_factor=0.1159, up_block_types=["UpDecoderBlock2D"] * 2,
                                use_post_quant_conv=False, use_quant_conv=False)
        return {"vae": vae, "text_encoder": C.qwen25_vl(tok, hidden=32), "tokenizer": tok,
                "text_encoder_2": C.clip_text(tok2, hidden=16), "tokenizer_2": tok2,
                "transformer": C.kandinsky5_transformer(), "scheduler": _scheduler("FlowMatchEulerDiscreteScheduler",
                                                                                  shift=7.0)()}
    return build


def _easyanimate(in_channels: int = 4) -> Callable[[], dict]:
    def build() -> dict:
        tok = C.qwen2_chat_tokenizer()
        return {"transformer": C.easyanimate_transformer(in_channels), "vae": C.magvit_vae(),
                "scheduler": C.flow_match(), "text_encoder": C.qwen2_vl(tok), "tokenizer": tok}
    return build


def _cogview4(control: bool = False) -> dict:
    """CogView 4: GLM-4 as text encoder; its tokenizer is byte-level BPE as GLM-4's (the real one is on the hub)."""
    from diffusers import FlowMatchEulerDiscreteScheduler
    tok = C.qwen2_tokenizer()
    return {"transformer": C.cogview4_transformer(), "vae": C.vae_kl(), "text_encoder": C.glm(tok), "tokenizer": tok,
            "scheduler": FlowMatchEulerDiscreteScheduler(base_shift=0.25, max_shift=0.75, base_image_seq_len=256,
                                                         use_dynamic_shifting=True, time_shift_type="linear")}


def _sana_video() -> dict:
    from diffusers import DPMSolverMultistepScheduler
    tok = C.gemma_tokenizer()
    return {"transformer": C.sana_video_transformer(), "vae": C.wan_vae(), "scheduler": DPMSolverMultistepScheduler(),
            "text_encoder": C.gemma2_text(tok), "tokenizer": tok}


_SANA_VIDEO_CALL = {"frames": 9, "max_sequence_length": 16, "complex_human_instruction": [],
                    "use_resolution_binning": False}


def _helios() -> dict:
    from diffusers import HeliosScheduler
    return _t5(C.helios_transformer, C.wan_vae, lambda: HeliosScheduler(stage_range=[0, 1], stages=1,
                                                                         use_dynamic_shifting=True), umt5=True)()


def _motif_video(image: bool = False) -> Callable[[], dict]:
    """Motif-Video; image: image to video, the first frame encoded by the text encoder's SigLIP tower (4 wide)."""
    def build() -> dict:
        from diffusers import AdaptiveProjectedGuidance
        from transformers import SiglipImageProcessor
        tok = C.t5_tokenizer()
        out = {"transformer": C.motif_video_transformer(4 if image else None), "vae": C.wan_vae(),
               "scheduler": _scheduler("FlowMatchEulerDiscreteScheduler", shift=7.0)(),
               "text_encoder": C.t5gemma2_encoder(tok, vision=image), "tokenizer": tok,
               "guider": AdaptiveProjectedGuidance()}
        if image:
            out["feature_extractor"] = SiglipImageProcessor(image_mean=[0.5] * 3, image_std=[0.5] * 3,
                                                            size={"height": 16, "width": 16})
        return out
    return build


def _hunyuan_video15() -> dict:
    from transformers import ByT5Tokenizer
    from diffusers import ClassifierFreeGuidance
    tok, tok2 = C.qwen2_chat_tokenizer(), ByT5Tokenizer()
    return {"transformer": C.hunyuan_video15_transformer(), "vae": C.hunyuan_video15_vae(),
            "scheduler": _scheduler("FlowMatchEulerDiscreteScheduler", shift=7.0)(),
            "text_encoder": C.qwen25_vl_text(tok), "tokenizer": tok, "text_encoder_2": C.t5_encoder(tok2),
            "tokenizer_2": tok2, "guider": ClassifierFreeGuidance(guidance_scale=1.0)}


def _krea2() -> dict:
    from diffusers import FlowMatchEulerDiscreteScheduler
    tok = C.qwen2_chat_tokenizer()
    return {"transformer": C.krea2_transformer(), "vae": C.qwenimage_vae(), "text_encoder": C.qwen3_vl(tok),
            "tokenizer": tok, "text_encoder_select_layers": (0, 1, 2),
            "scheduler": FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15,
                                                         base_image_seq_len=256, max_image_seq_len=6400)}


def _ovis() -> dict:
    from transformers import Qwen3Config, Qwen3Model
    tok = C.qwen2_chat_tokenizer()
    return {"transformer": C.ovis_transformer(), "vae": C.vae_flux(), "scheduler": C.flow_match(), "tokenizer": tok,
            "text_encoder": Qwen3Model(Qwen3Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                   num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                                   vocab_size=C.vocab_size(tok), max_position_embeddings=512))}


def _bria() -> dict:
    from diffusers import AutoencoderKL
    vae = AutoencoderKL(act_fn="silu", block_out_channels=(32,), in_channels=3, out_channels=3,
                        down_block_types=["DownEncoderBlock2D"], up_block_types=["UpDecoderBlock2D"], latent_channels=4,
                        sample_size=32, shift_factor=0, scaling_factor=0.13025, force_upcast=False)
    return _t5(C.bria_transformer, lambda: vae, C.flow_match)()


def _prx() -> dict:
    tok = C.gemma_tokenizer()
    tok.model_max_length = 64
    return {"transformer": C.prx_transformer(), "vae": C.vae_flux(latent_channels=4), "scheduler": C.flow_match(),
            "text_encoder": C.t5gemma_encoder(tok), "tokenizer": tok}


def _hunyuan_video15_i2v() -> dict:
    image_encoder, feature_extractor = C.siglip_vision(hidden=12, image_size=16)
    return _hunyuan_video15() | {"transformer": C.hunyuan_video15_transformer("i2v"), "image_encoder": image_encoder,
                                 "feature_extractor": feature_extractor}


def _helios_pyramid() -> dict:
    from diffusers import HeliosScheduler
    # gamma: the correlation of the block noise between pyramid stages; the default, 1/3, makes its 2x2 covariance
    # singular (its least eigenvalue is 1 - 3 gamma), and Cholesky fails
    return _helios() | {"scheduler": HeliosScheduler(stages=2, stage_range=[0, 0.5, 1], gamma=0.25,
                                                     use_dynamic_shifting=True)}


def _flux_prior_redux() -> dict:
    image_encoder, feature_extractor = C.siglip_vision()
    tok, tok2 = C.clip_tokenizer(), C.t5_tokenizer()
    return {"image_encoder": image_encoder, "feature_extractor": feature_extractor,
            "image_embedder": C.redux_image_encoder(), "text_encoder": C.clip_text(tok), "tokenizer": tok,
            "text_encoder_2": C.t5_encoder(tok2), "tokenizer_2": tok2}


def _ideogram4() -> dict:
    from diffusers.pipelines.ideogram4.pipeline_ideogram4 import QWEN3_VL_ACTIVATION_LAYERS as LAYERS
    tok = C.qwen2_chat_tokenizer()
    hidden = 8  # Qwen3-VL's width; the transformer reads the states of the layers LAYERS, concatenated
    return {"transformer": C.ideogram4_transformer(len(LAYERS) * hidden),
            "unconditional_transformer": C.ideogram4_transformer(len(LAYERS) * hidden),
            "vae": C.vae_flux2_patched(),
            "text_encoder": C.qwen3_vl(tok, hidden=hidden, layers=max(LAYERS) + 1), "tokenizer": tok,
            "scheduler": C.flow_match()}


def _prx_pixel() -> dict:
    tok = C.qwen2_chat_tokenizer()
    return {"transformer": C.prx_transformer(pixel=True), "scheduler": C.flow_match(), "text_encoder": C.qwen3_text(tok),
            "tokenizer": tok, "prompt_max_tokens": 16}


def _cosmos3() -> dict:
    """Cosmos 3 Omni: one transformer reads the prompt's tokens itself. Its safety checker switched off (the
    pipeline's own option; cosmos_guardrail is not installed)."""
    from diffusers import UniPCMultistepScheduler
    tok = C.qwen2_chat_tokenizer()
    return {"transformer": C.cosmos3_transformer(tok), "text_tokenizer": tok, "vae": C.wan_vae(),
            "scheduler": UniPCMultistepScheduler(), "enable_safety_checker": False}


def _amused() -> dict:
    """aMUSEd: a masked-token transformer (UVit2D) over a VQ-GAN's codebook (8 codes, a mask token at 31)."""
    from diffusers import AmusedScheduler, UVit2DModel, VQModel
    tok = C.clip_tokenizer()
    transformer = UVit2DModel(hidden_size=8, use_bias=False, hidden_dropout=0.0, cond_embed_dim=8,
                              micro_cond_encode_dim=2, micro_cond_embed_dim=10, encoder_hidden_size=8, vocab_size=32,
                              codebook_size=8, in_channels=8, block_out_channels=8, num_res_blocks=1, downsample=True,
                              upsample=True, block_num_heads=1, num_hidden_layers=1, num_attention_heads=1,
                              attention_dropout=0.0, intermediate_size=8, layer_norm_eps=1e-06,
                              ln_elementwise_affine=True)
    vqvae = VQModel(act_fn="silu", block_out_channels=[8], down_block_types=["DownEncoderBlock2D"], in_channels=3,
                    latent_channels=8, layers_per_block=1, norm_num_groups=8, num_vq_embeddings=8, out_channels=3,
                    sample_size=8, up_block_types=["UpDecoderBlock2D"], mid_block_add_attention=False,
                    lookup_from_codebook=True, force_upcast=False)
    return {"transformer": transformer, "scheduler": AmusedScheduler(mask_token_id=31), "vqvae": vqvae,
            "text_encoder": C.clip_text(tok, with_projection=True, hidden=8), "tokenizer": tok}


def _zimage() -> dict:
    tok = C.qwen2_chat_tokenizer()
    return {"transformer": C.zimage_transformer(),
            "vae": C.vae_kl(latent_channels=16, blocks=(32, 64), scaling_factor=0.3611, shift_factor=0.1159),
            "scheduler": C.flow_match(), "text_encoder": C.qwen3_text(tok), "tokenizer": tok}


def _flux2_klein() -> dict:
    tok = C.qwen2_chat_tokenizer()
    return {"transformer": C.flux2_transformer(), "vae": C.vae_flux2(), "scheduler": C.flow_match(),
            "text_encoder": C.qwen3_causal_lm(tok), "tokenizer": tok}


def _flux2() -> dict:
    """FLUX.2 [dev]: its text encoder is Mistral 3, read through a chat template (the real one's Pixtral processor
    does the same for a text-only prompt)."""
    tok = C.qwen2_chat_tokenizer()
    return {"transformer": C.flux2_transformer(guidance=True), "vae": C.vae_flux2(), "scheduler": C.flow_match(),
            "text_encoder": C.mistral3(tok), "tokenizer": tok}


def _ernie_image() -> dict:
    tok = C.qwen2_tokenizer()
    return {"transformer": C.ernie_image_transformer(), "vae": C.vae_flux2_patched(), "scheduler": C.flow_match(),
            "text_encoder": C.mistral3(tok, lm_head=False), "tokenizer": tok}


def _visualcloze_grid(size: int) -> Callable:
    """VisualCloze's image grid: one in-context example row (two images) and the query row (its image, then the
    one to generate, None)."""
    def make():
        import numpy as np
        from PIL import Image
        rng = np.random.default_rng(5)
        image = [Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8), mode="RGB") for _ in range(3)]
        return [[image[0], image[1]], [image[2], None]]
    return make


_VISUALCLOZE_CALL = {"task_prompt": "Each row goes from [IMAGE1] a depth map to [IMAGE2] a clear photo.",
                     "content_prompt": "a photo of a cat", "image": _visualcloze_grid(32), "max_sequence_length": 48}


def _blip_diffusion(controlnet: bool = False) -> Callable[[], dict]:
    """BLIP-Diffusion: the reference image's subject (Q-Former) enters the CLIP prompt; 8 wide throughout."""
    def build() -> dict:
        from diffusers import PNDMScheduler
        from diffusers.pipelines.deprecated.blip_diffusion.blip_image_processing import BlipImageProcessor
        tok = C.clip_tokenizer()
        out = {"text_encoder": C.context_clip_text(tok), "tokenizer": tok, "vae": C.vae_kl(), "qformer": C.blip2_qformer(),
               "unet": C.sd_unet(cross_attention_dim=8), "image_processor": BlipImageProcessor(),
               "scheduler": PNDMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                          set_alpha_to_one=False, skip_prk_steps=True)}
        if controlnet:
            out["controlnet"] = C.controlnet_for(C.sd_unet(cross_attention_dim=8))
        return out
    return build


_BLIP_CALL = {"reference_image": _pil_image(32), "source_subject_category": "cat", "target_subject_category": "cat",
              "prompt_reps": 2}


def _zimage_omni() -> dict:
    import torch
    siglip, siglip_processor = C.siglip2_vision()
    out = _zimage() | {"transformer": C.zimage_transformer(siglip_feat_dim=16), "siglip": siglip,
                       "siglip_processor": siglip_processor}
    out["vae"] = out["vae"].to(torch.bfloat16)  # the pipeline encodes condition images as bfloat16, whatever the VAE's
    return out


def _llada2() -> dict:
    """LLaDA 2: a language model denoises blocks of masked tokens (a tiny Llama here: the pipeline needs only
    logits); the mask token is one of the tokenizer's special tokens."""
    from diffusers import BlockRefinementScheduler
    tok = C.qwen2_tokenizer()
    return {"model": C.llama_causal_lm(tok), "scheduler": BlockRefinementScheduler(), "tokenizer": tok}


def _diffusion_gemma() -> dict:
    from diffusers import BlockRefinementScheduler
    tok = C.gemma_tokenizer()
    return {"model": C.diffusion_gemma(tok), "scheduler": BlockRefinementScheduler(), "processor": tok}


def _ace_step() -> dict:
    from diffusers import AutoencoderOobleck
    from transformers import Qwen3Config, Qwen3Model
    tok = C.qwen2_chat_tokenizer()
    audio_tokenizer, audio_token_detokenizer = C.ace_step_audio_tokenizers()
    return {"transformer": C.ace_step_transformer(), "condition_encoder": C.ace_step_condition_encoder(),
            "vae": AutoencoderOobleck(encoder_hidden_size=6, downsampling_ratios=[1, 2], decoder_channels=3,
                                      decoder_input_channels=8, audio_channels=2, channel_multiples=[2, 4],
                                      sampling_rate=50),  # 25 latent frames a second, 2 samples each: all kept
            "text_encoder": Qwen3Model(Qwen3Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                   num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                                   vocab_size=C.vocab_size(tok), max_position_embeddings=256)),
            "tokenizer": tok, "scheduler": _scheduler("FlowMatchEulerDiscreteScheduler", num_train_timesteps=1,
                                                      shift=1.0)(),
            "audio_tokenizer": audio_tokenizer, "audio_token_detokenizer": audio_token_detokenizer}


def _unidiffuser() -> dict:
    """UniDiffuser, run text to image (a prompt given); its GPT-2 caption tokenizer (text_tokenizer) only decodes
    the captions of image-to-text, so a byte-level BPE stands in for it."""
    from diffusers import DPMSolverMultistepScheduler
    tok, text_tok = C.clip_tokenizer(), C.qwen2_tokenizer()
    image_encoder, image_processor = C.clip_vision(image_size=32, hidden=C.TEXT_DIM, patch_size=4)
    return {"vae": C.vae_kl(), "text_encoder": C.clip_text(tok), "clip_tokenizer": tok, "image_encoder": image_encoder,
            "clip_image_processor": image_processor, "text_decoder": C.unidiffuser_text_decoder(text_tok),
            "text_tokenizer": text_tok, "unet": C.unidiffuser_model(),
            "scheduler": DPMSolverMultistepScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                                     solver_order=3)}


def _glm_image() -> dict:
    """GLM-Image without its autoregressive stage: the prior image tokens are given (the pipeline's documented
    text-to-image input); so neither the vision-language model nor its processor (whose tokenizer's image special
    tokens only the hub's GLM-Image tokenizer has) is built."""
    text_encoder, tok = C.byt5_encoder()
    return {"transformer": C.glm_image_transformer(), "text_encoder": text_encoder, "tokenizer": tok,
            "vae": C.vae_kl(blocks=(4, 8, 16, 16), latents_mean=[0.0] * 4, latents_std=[1.0] * 4),
            "scheduler": C.flow_match()}


def _dit() -> dict:
    return {"transformer": C.dit_transformer(), "vae": C.vae_kl(blocks=(4,)), "scheduler": C.ddim()}


def _unclip_super_res() -> dict:
    from diffusers import UnCLIPScheduler
    return {"super_res_first": C.unclip_super_res(), "super_res_last": C.unclip_super_res(),
            "super_res_scheduler": UnCLIPScheduler(variance_type="fixed_small_log", prediction_type="epsilon")}


def _unclip() -> dict:
    from diffusers import UnCLIPScheduler
    tok = C.clip_tokenizer()
    return {"prior": C.prior_transformer(), "decoder": C.unclip_decoder(), "text_proj": C.unclip_text_proj(),
            "text_encoder": C.clip_text(tok, with_projection=True), "tokenizer": tok,
            "prior_scheduler": UnCLIPScheduler(variance_type="fixed_small_log", prediction_type="sample",
                                               clip_sample_range=5.0),
            "decoder_scheduler": UnCLIPScheduler(variance_type="learned_range", prediction_type="epsilon"),
            **_unclip_super_res()}


def _unclip_image_variation() -> dict:
    image_encoder, feature_extractor = C.clip_vision(image_size=32, hidden=C.TEXT_DIM, patch_size=4)
    out = _unclip() | {"image_encoder": image_encoder, "feature_extractor": feature_extractor}
    del out["prior"], out["prior_scheduler"]
    return out


def _versatile_diffusion(text: bool = True, image: bool = True) -> Callable[[], dict]:
    """Versatile Diffusion: an image UNet (and with text, a text UNet: the pipeline borrows its attention blocks),
    conditioned on CLIP text and/or CLIP image embeddings of one width (TEXT_DIM)."""
    def build() -> dict:
        out = {"image_unet": C.sd_unet(), "vae": C.vae_kl(), "scheduler": C.ddim()}
        if text:
            out["text_unet"] = C.unet_flat()
        if text:
            out["tokenizer"] = C.clip_tokenizer()
            out["text_encoder"] = C.clip_text(out["tokenizer"], with_projection=True)
        if image:
            out["image_encoder"], out["image_feature_extractor"] = C.clip_vision(image_size=32, hidden=C.TEXT_DIM,
                                                                                 patch_size=4)
        return out
    return build


def _shap_e(image: bool = False) -> Callable[[], dict]:
    def build() -> dict:
        from diffusers import HeunDiscreteScheduler
        from transformers import CLIPImageProcessor
        out = {"prior": C.shap_e_prior(image), "shap_e_renderer": C.shap_e_renderer(),
               "scheduler": HeunDiscreteScheduler(beta_schedule="exp", num_train_timesteps=1024,
                                                  prediction_type="sample", use_karras_sigmas=True, clip_sample=True,
                                                  clip_sample_range=1.0)}
        if image:
            out["image_encoder"] = C.clip_vision(image_size=32, hidden=16, patch_size=4)[0]
            out["image_processor"] = CLIPImageProcessor(crop_size=32, size=32)
        else:
            out["tokenizer"] = C.clip_tokenizer()
            out["text_encoder"] = C.clip_text(out["tokenizer"], with_projection=True, hidden=16)
        return out
    return build


def _alt_diffusion() -> dict:
    tok = C.xlm_roberta_tokenizer()
    return _sd()() | {"text_encoder": C.roberta_series(tok), "tokenizer": tok}


def _sd_with_inverse() -> dict:
    """Stable Diffusion's components and a DDIM inverse scheduler (DiffEdit, Pix2Pix-Zero invert images with it)."""
    from diffusers import DDIMInverseScheduler
    return _sd()() | {"inverse_scheduler": DDIMInverseScheduler(beta_start=0.00085, beta_end=0.012,
                                                                beta_schedule="scaled_linear", clip_sample=False,
                                                                set_alpha_to_one=False)}


def _vq_diffusion() -> dict:
    from diffusers import VQDiffusionScheduler
    from diffusers.pipelines.deprecated.vq_diffusion import LearnedClassifierFreeSamplingEmbeddings
    tok = C.clip_tokenizer()
    return {"vqvae": C.vq_model(num_vq_embeddings=12, vq_embed_dim=3), "text_encoder": C.clip_text(tok),
            "tokenizer": tok, "transformer": C.vq_diffusion_transformer(), "scheduler": VQDiffusionScheduler(12),
            "learned_classifier_free_sampling_embeddings": LearnedClassifierFreeSamplingEmbeddings(learnable=False)}


def _stable_audio3(local_cond_dim: int = 5) -> Callable[[], dict]:
    return lambda: _stable_audio3_components(local_cond_dim)


def _stable_audio3_components(local_cond_dim: int) -> dict:
    from diffusers.pipelines.stable_audio_3 import StableAudio3DurationEmbedder
    tok = C.gemma_tokenizer()
    return {"transformer": C.stable_audio3_transformer(local_cond_dim=local_cond_dim), "vae": C.vae_same(),
            "scheduler": _scheduler("FlowMatchEulerDiscreteScheduler", num_train_timesteps=1, shift=1.0)(),
            "text_encoder": C.t5gemma_encoder(tok), "tokenizer": tok,
            "duration_embedder": StableAudio3DurationEmbedder(output_dim=8, fourier_dim=16)}


def _stable_audio() -> dict:
    from diffusers import CosineDPMSolverMultistepScheduler, StableAudioProjectionModel
    tok = C.t5_tokenizer()
    return {"transformer": C.stable_audio_transformer(), "vae": C.vae_oobleck(), "text_encoder": C.t5_encoder(tok),
            "tokenizer": tok,
            "scheduler": CosineDPMSolverMultistepScheduler(solver_order=2, prediction_type="v_prediction",
                                                           sigma_data=1.0, sigma_schedule="exponential"),
            "projection_model": StableAudioProjectionModel(text_encoder_dim=C.TEXT_DIM, conditioning_dim=4,
                                                           min_value=0, max_value=32)}


def _hidream() -> dict:
    tok, tok2, tok3, tok4 = C.clip_tokenizer(), C.clip_tokenizer(), C.t5_tokenizer(), C.qwen2_tokenizer()
    return {"transformer": C.hidream_transformer(), "vae": C.vae_kl(blocks=(4,), shift_factor=0.1159,
                                                                     scaling_factor=0.3611),
            "scheduler": C.flow_match(), "text_encoder": C.clip_text(tok, with_projection=True), "tokenizer": tok,
            "text_encoder_2": C.clip_text(tok2, with_projection=True), "tokenizer_2": tok2,
            "text_encoder_3": C.t5_encoder(tok3), "tokenizer_3": tok3,
            "text_encoder_4": C.llama_causal_lm(tok4), "tokenizer_4": tok4}


def _anyflow(far: bool = False) -> Callable[[], dict]:
    return _t5(lambda: C.anyflow_transformer(far), C.wan_vae,
               _scheduler("FlowMapEulerDiscreteScheduler", num_train_timesteps=1000, shift=5.0))


def _hunyuan_image() -> dict:
    from diffusers.guiders import AdaptiveProjectedMixGuidance
    tok = C.qwen2_tokenizer()
    text_encoder_2, tok2 = C.byt5_encoder()
    return {"transformer": C.hunyuan_image_transformer(), "vae": C.vae_hunyuan_image(),
            "scheduler": _scheduler("FlowMatchEulerDiscreteScheduler", shift=7.0)(),
            "text_encoder": C.qwen25_vl(tok), "tokenizer": tok, "text_encoder_2": text_encoder_2, "tokenizer_2": tok2,
            "guider": AdaptiveProjectedMixGuidance(adaptive_projected_guidance_start_step=2),
            "ocr_guider": AdaptiveProjectedMixGuidance(adaptive_projected_guidance_start_step=3)}


def _hunyuan_image_refiner() -> dict:
    from diffusers.guiders import AdaptiveProjectedMixGuidance
    tok = C.qwen2_tokenizer()
    return {"transformer": C.hunyuan_image_transformer(refiner=True),
            "vae": C.vae_hunyuan_image_refiner(), "scheduler": _scheduler("FlowMatchEulerDiscreteScheduler", shift=7.0)(),
            "text_encoder": C.qwen25_vl(tok), "tokenizer": tok,
            "guider": AdaptiveProjectedMixGuidance(adaptive_projected_guidance_start_step=2)}


def _bria_fibo() -> dict:
    tok = C.t5_tokenizer()
    return {"transformer": C.bria_fibo_transformer(), "vae": C.wan22_vae(), "scheduler": C.flow_match(),
            "text_encoder": C.smollm3(tok), "tokenizer": tok}


_QWEN_MASK_TOKEN = 256  # qwen2_tokenizer's first special token after the 256 byte symbols: "<|endoftext|>"
_T5_SHORT = {"max_sequence_length": 16}
_PAG_SD3 = {"pag_applied_layers": ["blocks.0"]}  # the tiny transformer has one block
_FLUX_CALL = {"max_sequence_length": 48}
_PIXART_CALL = {"max_sequence_length": 16, "use_resolution_binning": False, "clean_caption": False}
_HINT = {"hint": _image_tensor(3, 3, 64)}  # the control image of Kandinsky 2.2's ControlNet pipelines
_KANDINSKY_CALL = {"image_embeds": _embedding(1), "negative_image_embeds": _embedding(2)}
_SANA_CALL = {"max_sequence_length": 16, "complex_human_instruction": None, "use_resolution_binning": False,
              "clean_caption": False}
_QWEN_CALL = {"max_sequence_length": 16, "true_cfg_scale": 1.0}
_ZIMAGE_CALL = {"max_sequence_length": 16, "cfg_normalization": False, "cfg_truncation": 1.0}
_KLEIN_CALL = {"max_sequence_length": 64, "text_encoder_out_layers": (1,)}
_VIDEO = {"max_sequence_length": 16, "num_frames": 9}

RECIPES: dict[str, Recipe] = {
    # unCLIP (Karlo): prior, pixel decoder, two super-resolution UNets; image variation: no prior, the CLIP image
    "UnCLIPPipeline": Recipe(_unclip, {"prior_num_inference_steps": 2, "decoder_num_inference_steps": 2,
                                       "super_res_num_inference_steps": 2}),
    "UnCLIPImageVariationPipeline": Recipe(_unclip_image_variation, {"decoder_num_inference_steps": 2,
                                                                     "super_res_num_inference_steps": 2}),
    # Versatile Diffusion: text to image, image variation, and both at once (dual-guided: text and image)
    "VersatileDiffusionTextToImagePipeline": Recipe(_versatile_diffusion(image=False)),
    "VersatileDiffusionImageVariationPipeline": Recipe(_versatile_diffusion(text=False)),
    "VersatileDiffusionDualGuidedPipeline": Recipe(_versatile_diffusion()),
    # Shap-E: a prior over a 3D latent; the latent is compared, as Diffusers' tests do: the tiny renderer's 20 views
    # come out near black whatever the latent (mean 0.001), and comparing them would compare nothing
    "ShapEPipeline": Recipe(_shap_e(), {"output_type": "latent"}),
    "ShapEImg2ImgPipeline": Recipe(_shap_e(image=True), {"output_type": "latent"}),
    # the mega pipeline has no __call__: its text_to_image method runs (as its other two run in the rows above)
    "VersatileDiffusionPipeline": Recipe(_versatile_diffusion(), method="text_to_image"),
    # DiffEdit: the mask and the inverted latents (one per step) as DiffEdit's own generate_mask and invert give them
    "StableDiffusionDiffEditPipeline": Recipe(_sd_with_inverse, {"mask_image": _ones(1, 16, 16),
                                                                 "image_latents": _tensor(3, 1, 2, 4, 16, 16),
                                                                 "inpaint_strength": 1.0}),
    # Pix2Pix-Zero: the edit direction from mean source and target prompt embeddings (CLIP text states)
    "StableDiffusionPix2PixZeroPipeline": Recipe(_sd_with_inverse, {
        "source_embeds": _tensor(4, 2, 77, 32), "target_embeds": _tensor(5, 2, 77, 32),
        "cross_attention_guidance_amount": 0.15}),
    # VQ-Diffusion: discrete diffusion over VQ codes (12 classes), decoded by the VQ model
    "VQDiffusionPipeline": Recipe(_vq_diffusion),
    # Stable Audio 3: one second of stereo audio at 16 samples a second; a reference waveform to vary or inpaint
    "StableAudio3Pipeline": Recipe(_stable_audio3(), {"duration": 1.0}),
    "StableAudio3AudioToAudioPipeline": Recipe(_stable_audio3(), {"duration": 1.0, "audio": _tensor(6, 1, 2, 16),
                                                                "init_noise_level": 0.8}),
    # inpainting: the masked reference's latents (8 channels) and the mask join the transformer's local condition
    "StableAudio3InpaintPipeline": Recipe(_stable_audio3(local_cond_dim=9), {"duration": 1.0, "audio": _tensor(6, 1, 2, 16),
                                                           "mask_start_seconds": 0.25, "mask_end_seconds": 0.75}),
    "StableAudioPipeline": Recipe(_stable_audio, {"guidance_scale": 6.0}),
    # ACE-Step: music from a prompt and lyrics, 0.4 s (10 latent frames at 25 Hz)
    "AceStepPipeline": Recipe(_ace_step, {"lyrics": "[verse]\nsoft notes in the morning", "audio_duration": 0.4,
                                          "max_text_length": 32}),
    # LongCat-AudioDiT: 0.1 s of mono audio at 24 kHz
    "LongCatAudioDiTPipeline": Recipe(lambda: {"transformer": C.longcat_audio_dit(), "vae": C.vae_longcat_audio(),
                                               **_t5_text(umt5=True)}, {"audio_duration_s": 0.1}),
    # HiDream-I1: two CLIPs, T5 and Llama (its layers' hidden states) condition a MoE transformer
    "HiDreamImagePipeline": Recipe(_hidream, {"max_sequence_length": 16}),
    # AnyFlow: a flow-map Wan-like video transformer; FAR: autoregressive over chunks of latent frames (text to
    # video: no video to continue)
    "AnyFlowPipeline": Recipe(_anyflow(), _VIDEO | {"negative_prompt": "negative"}, size=16),
    "AnyFlowFARPipeline": Recipe(_anyflow(far=True), _VIDEO | {"negative_prompt": "negative", "video": None},
                                 size=16),
    # HunyuanImage 2.1: Qwen2.5-VL and ByT5 (glyphs) condition the transformer; adaptive projected guidance
    "HunyuanImagePipeline": Recipe(_hunyuan_image, size=16),
    "HunyuanImageRefinerPipeline": Recipe(_hunyuan_image_refiner),
    # Bria FIBO: a JSON-like structured prompt read by SmolLM3
    "BriaFiboPipeline": Recipe(_bria_fibo, {"prompt": "{'text': 'a photo of a cat'}", "negative_prompt": "bad, ugly"}),
    "BriaFiboEditPipeline": Recipe(_bria_fibo, {
        "prompt": '{"text": "a photo of a cat", "edit_instruction": "a photo of a dog"}', "negative_prompt": "bad, ugly"}),
    "Flux2Pipeline": Recipe(_flux2, _KLEIN_CALL | {"guidance_scale": 4.0, "image": None}, size=8),  # text to image
    # ERNIE-Image, without its prompt enhancer (an optional Ministral 3 that rewrites the prompt)
    "ErnieImagePipeline": Recipe(_ernie_image, {"use_pe": False}),
    # VisualCloze: Flux Fill over a grid of in-context examples and the query (image latents and mask: 12 channels);
    # the combined pipeline upsamples the result in a second pass
    "VisualClozeGenerationPipeline": Recipe(lambda: _flux(12, 4)() | {"resolution": 32}, _VISUALCLOZE_CALL),
    "VisualClozePipeline": Recipe(lambda: _flux(12, 4)() | {"resolution": 32}, _VISUALCLOZE_CALL | {
        "upsampling_height": 32, "upsampling_width": 32, "upsampling_strength": 0.4}),
    # BLIP-Diffusion: subject-driven generation from a reference image; with a ControlNet on a condition image.
    # Both fail on CPU under Transformers 5: Diffusers' Q-Former calls PreTrainedModel.invert_attention_mask, removed
    "BlipDiffusionPipeline": Recipe(_blip_diffusion(), _BLIP_CALL),
    "BlipDiffusionControlNetPipeline": Recipe(_blip_diffusion(controlnet=True),
                                              _BLIP_CALL | {"condtioning_image": _pil_image(32)}),  # sic
    # LLaDA 2: text by masked diffusion, two blocks of 8 tokens, greedy (temperature 0); the token ids are compared
    "LLaDA2Pipeline": Recipe(_llada2, {"use_chat_template": False, "gen_length": 16, "block_length": 8,
                                       "temperature": 0.0, "eos_early_stop": False, "output_type": "seq",
                                       "mask_token_id": _QWEN_MASK_TOKEN}),
    # DiffusionGemma: text by block diffusion (two canvases of 8 tokens), greedy; a text prompt, no image
    "DiffusionGemmaPipeline": Recipe(_diffusion_gemma, {"gen_length": 16, "temperature": 0.0, "eos_early_stop": False,
                                                        "output_type": "seq", "image": None}),
    # GLM-Image: the DiT stage, text to image from 4 prior tokens (one per 16-pixel cell of the 32-pixel image)
    "GlmImagePipeline": Recipe(_glm_image, {"prior_token_ids": _token_ids(8, 128, 1, 4), "image": None},
                               on_device=("prior_token_ids",)),
    # Ideogram 4: a conditional and an unconditional transformer, guidance per step
    "Ideogram4Pipeline": Recipe(_ideogram4, {"guidance_schedule": [1.5, 1.5], "max_sequence_length": 48}, size=16),
    # Flux Redux: no denoiser; SigLIP image states embedded as T5-width prompt tokens (its output: the embeddings)
    "FluxPriorReduxPipeline": Recipe(_flux_prior_redux),
    # LTX long video from several prompts, in temporal tiles (two of 9 frames, overlapping by 8), from an image
    "LTXI2VLongMultiPromptPipeline": Recipe(_t5(C.ltx_transformer, C.ltx_vae, C.flow_match), {
        "num_frames": 17, "temporal_tile_size": 16, "temporal_overlap": 8, "cond_image": _pil_image(32),
        "decode_horizontal_tiles": 1, "decode_vertical_tiles": 1}),
    "UniDiffuserPipeline": Recipe(_unidiffuser, {"image": None}),  # text to image: no image to caption
    # AltDiffusion: Stable Diffusion with a multilingual (XLM-RoBERTa) text encoder
    "AltDiffusionPipeline": Recipe(_alt_diffusion),
    "AltDiffusionImg2ImgPipeline": Recipe(_alt_diffusion),
    # Stable Diffusion 1.x/2.x and the pipelines built on its components
    "StableDiffusionPipeline": Recipe(_sd()),
    "StableDiffusionImg2ImgPipeline": Recipe(_sd()),
    "StableDiffusionInpaintPipeline": Recipe(_sd(in_channels=9)),
    "StableDiffusionInstructPix2PixPipeline": Recipe(_sd(in_channels=8)),
    "StableDiffusionPAGPipeline": Recipe(_sd()),
    "StableDiffusionPAGImg2ImgPipeline": Recipe(_sd()),
    "StableDiffusionPAGInpaintPipeline": Recipe(_sd(in_channels=9)),
    "StableDiffusionControlNetPipeline": Recipe(_sd(controlnet=True)),
    "StableDiffusionControlNetImg2ImgPipeline": Recipe(_sd(controlnet=True)),
    "StableDiffusionControlNetInpaintPipeline": Recipe(_sd(in_channels=9, controlnet=True)),
    "StableDiffusionControlNetPAGPipeline": Recipe(_sd(controlnet=True)),
    "StableDiffusionControlNetPAGInpaintPipeline": Recipe(_sd(in_channels=9, controlnet=True)),
    # the adapter's features are added inside cross-attention blocks, and after plain ones: cross-attention first
    "StableDiffusionAdapterPipeline": Recipe(_sd(adapter=True, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                                 up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))),
    "LatentConsistencyModelPipeline": Recipe(_sd(scheduler=C.lcm, time_cond_proj_dim=32)),
    "LatentConsistencyModelImg2ImgPipeline": Recipe(_sd(scheduler=C.lcm, time_cond_proj_dim=32)),
    "StableDiffusionSAGPipeline": Recipe(_sd()),
    "StableDiffusionPanoramaPipeline": Recipe(_sd(), {"width": 64, "view_batch_size": 1}),
    "StableDiffusionParadigmsPipeline": Recipe(_sd(scheduler=_scheduler("DDPMParallelScheduler"))),
    "StableDiffusionModelEditingPipeline": Recipe(_sd(scheduler=C.euler)),
    "SemanticStableDiffusionPipeline": Recipe(_sd()),
    "StableDiffusionControlNetXSPipeline": Recipe(_controlnet_xs()),
    "StableDiffusionXLControlNetXSPipeline": Recipe(_controlnet_xs(sdxl=True)),
    "StableDiffusionGLIGENPipeline": Recipe(_sd(attention_type="gated"), {
        "gligen_phrases": ["a cat"], "gligen_boxes": [[0.1, 0.1, 0.6, 0.6]], "gligen_scheduled_sampling_beta": 1.0}),
    "StableDiffusionGLIGENTextImagePipeline": Recipe(_gligen_text_image, {
        "gligen_phrases": ["a cat"], "gligen_boxes": [[0.1, 0.1, 0.6, 0.6]], "gligen_scheduled_sampling_beta": 1.0,
        "gligen_images": [None]}),
    # RGB and depth: a VAE of 6 channels (RGB + depth as 3)
    "StableDiffusionLDM3DPipeline": Recipe(lambda: _sd()() | {"vae": C.vae_kl_rgbd()}),
    "PaintByExamplePipeline": Recipe(_paint_by_example),
    "LDMTextToImagePipeline": Recipe(_ldm_text_to_image),
    "CycleDiffusionPipeline": Recipe(_sd(), {"source_prompt": "a photo of a dog", "strength": 0.8, "eta": 0.1}),
    "StableDiffusionImageVariationPipeline": Recipe(_image_variation),
    "StableDiffusionUpscalePipeline": Recipe(_sd_upscale, size=16),  # a 16-pixel image upscaled 4x
    "StableDiffusionLatentUpscalePipeline": Recipe(_sd_latent_upscale, size=16),
    # a given depth map (the pipeline's DPT depth estimator is not needed then); latents + depth: 5 channels
    "StableDiffusionDepth2ImgPipeline": Recipe(_sd(in_channels=5), {"depth_map": _tensor(5, 1, 32, 32),
                                                                    "strength": 0.8}),
    "StableDiffusionAttendAndExcitePipeline": Recipe(_sd(), {"token_indices": [2], "max_iter_to_alter": 1,
                                                             "attn_res": (8, 8)}),
    # Stable Diffusion XL
    "StableDiffusionXLPipeline": Recipe(_sdxl()),
    "StableDiffusionXLImg2ImgPipeline": Recipe(_sdxl(), {"strength": 0.8}),  # default 0.3 of 2 steps: none
    "StableDiffusionXLInpaintPipeline": Recipe(_sdxl()),
    "KolorsPipeline": Recipe(_kolors),
    "KolorsImg2ImgPipeline": Recipe(_kolors, {"strength": 0.8}),
    "KolorsPAGPipeline": Recipe(_kolors),
    "StableDiffusionXLPAGPipeline": Recipe(_sdxl()),
    "StableDiffusionXLPAGImg2ImgPipeline": Recipe(_sdxl(), {"strength": 0.8}),
    "StableDiffusionXLPAGInpaintPipeline": Recipe(_sdxl()),
    "StableDiffusionXLInstructPix2PixPipeline": Recipe(_sdxl(in_channels=8)),
    "StableDiffusionXLControlNetPipeline": Recipe(_sdxl(controlnet=True)),
    "StableDiffusionXLControlNetImg2ImgPipeline": Recipe(_sdxl(controlnet=True)),
    "StableDiffusionXLControlNetInpaintPipeline": Recipe(_sdxl(controlnet=True)),
    "StableDiffusionXLControlNetPAGPipeline": Recipe(_sdxl(controlnet=True)),
    "StableDiffusionXLControlNetPAGImg2ImgPipeline": Recipe(_sdxl(controlnet=True)),
    "StableDiffusionXLControlNetUnionPipeline": Recipe(_sdxl(union=True), {"control_mode": [0]}),
    "StableDiffusionXLControlNetUnionImg2ImgPipeline": Recipe(_sdxl(union=True), {"control_mode": [0]}),
    "StableDiffusionXLControlNetUnionInpaintPipeline": Recipe(_sdxl(union=True), {"control_mode": [0]}),
    "StableDiffusionXLAdapterPipeline": Recipe(_sdxl(adapter=True)),
    # unconditional image generation
    "DDPMPipeline": Recipe(_unconditional("DDPMScheduler"), size=16),
    "DDIMPipeline": Recipe(_unconditional("DDIMScheduler"), size=16),
    "PNDMPipeline": Recipe(_unconditional("PNDMScheduler"), {"num_inference_steps": 20}, size=16),  # PRK warm-up
    "ScoreSdeVePipeline": Recipe(_unconditional("ScoreSdeVeScheduler"), size=16),
    "KarrasVePipeline": Recipe(_unconditional("KarrasVeScheduler"), size=16),
    "RePaintPipeline": Recipe(_unconditional("RePaintScheduler"), {"jump_length": 1, "jump_n_sample": 1}),
    "DiTPipeline": Recipe(_dit, {"class_labels": [1]}, size=16),
    "AmusedPipeline": Recipe(_amused, size=8),
    "AmusedImg2ImgPipeline": Recipe(_amused, {"strength": 0.8}, size=8),
    "AmusedInpaintPipeline": Recipe(_amused, {"strength": 0.8}, size=8),
    "LDMPipeline": Recipe(_ldm),
    "LDMSuperResolutionPipeline": Recipe(_ldm_super_resolution),  # the image is cropped to a multiple of 32
    "DanceDiffusionPipeline": Recipe(lambda: {"unet": C.unet_1d(), "scheduler": _scheduler("IPNDMScheduler")()}),
    "ConsistencyModelPipeline": Recipe(_unconditional("CMStochasticIterativeScheduler"),
                                       {"num_inference_steps": None, "timesteps": [22, 0]}, size=16),
    # Marigold: image in, depth / normals / intrinsic images out (one denoising step, as Marigold's LCM checkpoints)
    "MarigoldDepthPipeline": Recipe(_marigold(8, 4, prediction_type="depth", scale_invariant=True,
                                              shift_invariant=True),
                                    {"num_inference_steps": 1, "processing_resolution": 0}),
    "MarigoldNormalsPipeline": Recipe(_marigold(8, 4, prediction_type="normals", use_full_z_range=True),
                                      {"num_inference_steps": 1, "processing_resolution": 0}),
    "MarigoldIntrinsicsPipeline": Recipe(_marigold(12, 8, prediction_type="intrinsics", target_properties={
        "target_names": ["albedo", "shading"], "albedo": {"prediction_space": "srgb"},
        "shading": {"prediction_space": "linear"}}), {"num_inference_steps": 1, "processing_resolution": 0}),
    # Kandinsky 2.2 decoders (conditioned on an image embedding)
    "KandinskyV22Pipeline": Recipe(_kandinsky22(), _KANDINSKY_CALL),
    "KandinskyV22Img2ImgPipeline": Recipe(_kandinsky22(), _KANDINSKY_CALL | {"strength": 0.8}),
    "KandinskyV22InpaintPipeline": Recipe(_kandinsky22(in_channels=9), _KANDINSKY_CALL),
    "KandinskyV22ControlnetPipeline": Recipe(_kandinsky22(in_channels=8, hint=True), _KANDINSKY_CALL | _HINT, size=64),
    "KandinskyV22ControlnetImg2ImgPipeline": Recipe(_kandinsky22(in_channels=8, hint=True),
                                                    _KANDINSKY_CALL | _HINT | {"strength": 0.8}, size=64),
    # Kandinsky 2.1: decoders conditioned on text (multilingual CLIP) and an image embedding; its prior; both
    "KandinskyPipeline": Recipe(_kandinsky21(), _KANDINSKY_CALL),
    "KandinskyImg2ImgPipeline": Recipe(_kandinsky21(), _KANDINSKY_CALL | {"strength": 0.8}),
    "KandinskyInpaintPipeline": Recipe(_kandinsky21(9), _KANDINSKY_CALL),
    "KandinskyPriorPipeline": Recipe(_kandinsky22_prior),
    "KandinskyCombinedPipeline": Recipe(_kandinsky21_combined(), {"prior_num_inference_steps": 2}),
    "KandinskyImg2ImgCombinedPipeline": Recipe(_kandinsky21_combined(), {"prior_num_inference_steps": 2,
                                                                         "strength": 0.8}),
    "KandinskyInpaintCombinedPipeline": Recipe(_kandinsky21_combined(9), {"prior_num_inference_steps": 2}),
    # Kandinsky 2.2's prior (text to CLIP image embedding), and prior + decoder in one call
    "KandinskyV22PriorPipeline": Recipe(_kandinsky22_prior),
    "KandinskyV22PriorEmb2EmbPipeline": Recipe(_kandinsky22_prior, {"strength": 0.5}),
    "KandinskyV22CombinedPipeline": Recipe(_kandinsky22_combined(), {"prior_num_inference_steps": 2}),
    "KandinskyV22Img2ImgCombinedPipeline": Recipe(_kandinsky22_combined(), {"prior_num_inference_steps": 2,
                                                                            "strength": 0.8}),
    "KandinskyV22InpaintCombinedPipeline": Recipe(_kandinsky22_combined(9), {"prior_num_inference_steps": 2}),
    # DeepFloyd IF: pixel-space cascade (a 3-channel base stage, a super-resolution stage)
    "IFPipeline": Recipe(_deepfloyd_if(), {"clean_caption": False}),
    "IFImg2ImgPipeline": Recipe(_deepfloyd_if(), {"clean_caption": False, "strength": 0.8}),
    "IFInpaintingPipeline": Recipe(_deepfloyd_if(), {"clean_caption": False, "strength": 0.8}),
    "IFSuperResolutionPipeline": Recipe(_deepfloyd_if(True), {"clean_caption": False}),
    "IFImg2ImgSuperResolutionPipeline": Recipe(_deepfloyd_if(True), {"clean_caption": False, "strength": 0.8}),
    "IFInpaintingSuperResolutionPipeline": Recipe(_deepfloyd_if(True), {"clean_caption": False, "strength": 0.8}),
    # Stable unCLIP: a UNet conditioned on a (noised) CLIP image embedding, from a prior or from an image
    "StableUnCLIPPipeline": Recipe(_stable_unclip, {"prior_num_inference_steps": 2}),
    "StableUnCLIPImg2ImgPipeline": Recipe(_stable_unclip_img2img),
    # Wuerstchen (Stable Cascade's predecessor): prior, decoder, both
    "WuerstchenPriorPipeline": Recipe(_wuerstchen_prior, size=128),
    "WuerstchenDecoderPipeline": Recipe(_wuerstchen_decoder, {"image_embeddings": _ones(1, 2, 4, 4)}),
    "WuerstchenCombinedPipeline": Recipe(_wuerstchen_combined, {"prior_num_inference_steps": 2}, size=128),
    # Kandinsky 3 (T5-conditioned UNet, MoVQ decoder)
    "Kandinsky3Pipeline": Recipe(_kandinsky3, size=16),
    "Kandinsky3Img2ImgPipeline": Recipe(_kandinsky3, {"strength": 0.8}, size=16),
    # Flux
    "FluxPipeline": Recipe(_flux(), _FLUX_CALL, size=8),
    "FluxImg2ImgPipeline": Recipe(_flux(), _FLUX_CALL, size=32),
    "FluxInpaintPipeline": Recipe(_flux(), _FLUX_CALL, size=32),
    "FluxControlPipeline": Recipe(_flux(in_channels=8, out_channels=4), _FLUX_CALL, size=8),
    "FluxControlImg2ImgPipeline": Recipe(_flux(in_channels=8, out_channels=4), _FLUX_CALL, size=32),
    "FluxControlInpaintPipeline": Recipe(_flux(in_channels=8, out_channels=4), _FLUX_CALL, size=32),
    # Fill: latents, masked-image latents (2 channels each, packed 8) and the packed mask (4)
    "FluxFillPipeline": Recipe(_flux(in_channels=20, out_channels=8, latent_channels=2), _FLUX_CALL, size=32),
    "FluxKontextPipeline": Recipe(_flux(), _FLUX_CALL | {"max_area": 8 * 8, "_auto_resize": False}, size=8),
    "FluxKontextInpaintPipeline": Recipe(_flux(), _FLUX_CALL | {"strength": 0.8, "_auto_resize": False}, size=32),
    "FluxControlNetPipeline": Recipe(_flux(16, latent_channels=4, controlnet_channels=16),
                                     _FLUX_CALL | {"controlnet_conditioning_scale": 0.5}, size=32),
    "FluxControlNetImg2ImgPipeline": Recipe(_flux(controlnet_channels=4), _FLUX_CALL | {"strength": 0.8}, size=32),
    "FluxControlNetInpaintPipeline": Recipe(_flux(8, latent_channels=2, controlnet_channels=8),
                                            _FLUX_CALL | {"strength": 0.8}, size=32),
    "Flux2KleinPipeline": Recipe(_flux2_klein, _KLEIN_CALL | {"image": None}, size=8),  # text to image
    # a reference image of at least 64 pixels (the pipeline's minimum), an 8-pixel output
    "Flux2KleinKVPipeline": Recipe(_flux2_klein, _KLEIN_CALL | {"image": _pil_image(64)}, size=8),
    "Flux2KleinInpaintPipeline": Recipe(_flux2_klein, _KLEIN_CALL | {"strength": 0.8}, size=32),
    "ChromaPipeline": Recipe(_t5(C.chroma_transformer, C.vae_flux, C.flow_match), _FLUX_CALL, size=8),
    "ChromaImg2ImgPipeline": Recipe(_t5(C.chroma_transformer, C.vae_flux, C.flow_match), _FLUX_CALL, size=32),
    "ChromaInpaintPipeline": Recipe(_t5(C.chroma_transformer, C.vae_flux, C.flow_match), _FLUX_CALL | {"strength": 0.8},
                                    size=32),
    # Stable Diffusion 3
    "StableDiffusion3Pipeline": Recipe(_sd3(), _T5_SHORT),
    "StableDiffusion3Img2ImgPipeline": Recipe(_sd3(), _T5_SHORT),
    "StableDiffusion3InpaintPipeline": Recipe(_sd3(16), _T5_SHORT | {"strength": 0.8}),  # 16 or 33 channels
    "StableDiffusion3PAGPipeline": Recipe(lambda: _sd3()() | _PAG_SD3, _T5_SHORT),
    "StableDiffusion3PAGImg2ImgPipeline": Recipe(lambda: _sd3()() | _PAG_SD3, _T5_SHORT),
    "StableDiffusion3ControlNetPipeline": Recipe(_sd3(controlnet={}), _T5_SHORT),
    "StableDiffusion3ControlNetInpaintingPipeline": Recipe(_sd3(controlnet={"extra_conditioning_channels": 1}),
                                                           _T5_SHORT),
    # T5-conditioned image transformers
    "PixArtAlphaPipeline": Recipe(_t5(C.pixart_transformer, C.vae_kl, C.ddim), _PIXART_CALL),
    "PixArtSigmaPipeline": Recipe(_t5(C.pixart_transformer, C.vae_kl, C.ddim), _PIXART_CALL),
    "PixArtSigmaPAGPipeline": Recipe(_t5(C.pixart_transformer, C.vae_kl, C.ddim), _PIXART_CALL),
    "AuraFlowPipeline": Recipe(_t5(C.auraflow_transformer, C.vae_kl, C.flow_match, umt5=True), _T5_SHORT),
    "CogView3PlusPipeline": Recipe(_t5(C.cogview3_transformer, C.vae_kl, _scheduler("CogVideoXDDIMScheduler")),
                                   _T5_SHORT, size=16),
    "HunyuanDiTPipeline": Recipe(_hunyuandit, {"use_resolution_binning": False}, size=16),
    "HunyuanDiTPAGPipeline": Recipe(_hunyuandit, {"use_resolution_binning": False}, size=16),
    "HunyuanDiTControlNetPipeline": Recipe(lambda: _hunyuandit() | {"controlnet": C.hunyuandit_controlnet()},
                                           {"use_resolution_binning": False}, size=16),
    # Gemma-conditioned
    "SanaPipeline": Recipe(_sana, _SANA_CALL),
    "SanaPAGPipeline": Recipe(lambda: _sana() | {"pag_applied_layers": ["transformer_blocks.0"]}, _SANA_CALL),
    "SanaSprintPipeline": Recipe(_sana_sprint, _SANA_CALL),
    "SanaSprintImg2ImgPipeline": Recipe(_sana_sprint, _SANA_CALL | {"strength": 0.5}),
    "SanaControlNetPipeline": Recipe(lambda: _sana() | {"controlnet": C.sana_controlnet()}, _SANA_CALL),
    # a negative prompt of some tokens: GLM-4's tokenizer prefixes special tokens, this one not (an empty prompt
    # would be no tokens at all)
    "CogView4Pipeline": Recipe(_cogview4, {"max_sequence_length": 16, "negative_prompt": "bad"}, size=16),
    "CogView4ControlPipeline": Recipe(lambda: _cogview4() | {"transformer": C.cogview4_transformer(in_channels=8)},
                                      {"max_sequence_length": 16, "negative_prompt": "bad"}, size=16),
    "LuminaPipeline": Recipe(_lumina(C.lumina_next_transformer, C.gemma_causal_lm),
                             {"max_sequence_length": 16, "clean_caption": False}, size=32),  # assumes a VAE factor of 8
    "Lumina2Pipeline": Recipe(_lumina(C.lumina2_transformer, C.gemma2_text), {"max_sequence_length": 16}, size=32),
    # Qwen2.5-VL-conditioned
    "QwenImagePipeline": Recipe(_qwenimage, _QWEN_CALL),
    "QwenImageImg2ImgPipeline": Recipe(_qwenimage, _QWEN_CALL),
    "QwenImageInpaintPipeline": Recipe(_qwenimage, _QWEN_CALL),
    "Kandinsky5T2IPipeline": Recipe(_kandinsky5(video=False), {"max_sequence_length": 8}, size=64),
    "Kandinsky5T2VPipeline": Recipe(_kandinsky5(video=True), {"max_sequence_length": 8, "num_frames": 5}),
    "QwenImageControlNetPipeline": Recipe(lambda: _qwenimage() | {"controlnet": C.qwenimage_controlnet()},
                                          _QWEN_CALL | {"controlnet_conditioning_scale": 0.5}),
    "QwenImageControlNetInpaintPipeline": Recipe(lambda: _qwenimage() | {"controlnet": C.qwenimage_controlnet(4)},
                                                 _QWEN_CALL | {"controlnet_conditioning_scale": 0.5}),
    "ZImageControlNetPipeline": Recipe(lambda: _zimage() | {"controlnet": C.zimage_controlnet()}, _ZIMAGE_CALL),
    "ZImageControlNetInpaintPipeline": Recipe(lambda: _zimage() | {"controlnet": C.zimage_controlnet(33)},
                                              _ZIMAGE_CALL),
    "ZImagePipeline": Recipe(_zimage, _ZIMAGE_CALL),
    # Z-Image Omni: the condition image enters as VAE latents and as SigLIP 2 features
    "ZImageOmniPipeline": Recipe(_zimage_omni, _ZIMAGE_CALL | {"image": _pil_image(64)}),  # at least 64 pixels
    "OvisImagePipeline": Recipe(_ovis, {"max_sequence_length": 32, "negative_prompt": "bad quality"}, size=16),
    "BriaPipeline": Recipe(_bria, {"max_sequence_length": 48, "negative_prompt": "bad, ugly"}, size=16),
    "PRXPipeline": Recipe(_prx, {"use_resolution_binning": False, "guidance_scale": 1.0}),
    # pixel-space PRX: no VAE, the transformer denoises RGB; Qwen3 reads the prompt
    "PRXPixelPipeline": Recipe(_prx_pixel, {"use_resolution_binning": False, "guidance_scale": 1.0}),
    "Krea2Pipeline": Recipe(_krea2, {"max_sequence_length": 16, "negative_prompt": "bad quality"}),
    "ZImageImg2ImgPipeline": Recipe(_zimage, _ZIMAGE_CALL | {"strength": 0.8}),
    "ZImageInpaintPipeline": Recipe(_zimage, _ZIMAGE_CALL | {"strength": 0.8}),
    # video from Stable Diffusion's components
    "AnimateDiffPipeline": Recipe(_animatediff, {"num_frames": 2}),
    "AnimateDiffVideoToVideoPipeline": Recipe(_animatediff, {"strength": 0.8}),
    "AnimateDiffControlNetPipeline": Recipe(_animatediff_with(lambda: C.controlnet_for(C.sd_unet())),
                                            {"num_frames": 2, "conditioning_frames": _pil_frames(2, 32)}),
    "AnimateDiffSparseControlNetPipeline": Recipe(_animatediff_with(C.sparse_controlnet),
                                                  {"num_frames": 2, "conditioning_frames": _pil_frames(2, 32),
                                                   "controlnet_frame_indices": [0, 1]}),
    "AnimateDiffVideoToVideoControlNetPipeline": Recipe(_animatediff_with(lambda: C.controlnet_for(C.sd_unet())),
                                                        {"strength": 0.8, "conditioning_frames": _pil_frames(9, 32)}),
    "AnimateDiffSDXLPipeline": Recipe(_animatediff_sdxl, {"num_frames": 2}),
    "AnimateDiffPAGPipeline": Recipe(_animatediff, {"num_frames": 2}),
    # PIA: the image's latents and a mask join the noise (9 channels, the motion adapter's conv_in)
    "PIAPipeline": Recipe(lambda: _animatediff() | {"motion_adapter": C.motion_adapter(conv_in_channels=9)},
                          {"num_frames": 2}),
    # ModelScope text-to-video (UNet3D), I2VGen-XL, Text2Video-Zero (Stable Diffusion's UNet, frames by warping)
    "TextToVideoSDPipeline": Recipe(_text_to_video_sd, {"num_frames": 2}),
    "VideoToVideoSDPipeline": Recipe(_text_to_video_sd, {"strength": 0.8}),
    # clip_skip: its default (1) reads CLIPTextModel.text_model, which Transformers 5 removed (fails on CPU)
    "I2VGenXLPipeline": Recipe(_i2vgenxl, {"num_frames": 2, "clip_skip": None}),
    "TextToVideoZeroPipeline": Recipe(_sd(), {"video_length": 2, "num_inference_steps": 4, "t0": 1, "t1": 2}),
    "TextToVideoZeroSDXLPipeline": Recipe(_sdxl(), {"video_length": 2, "num_inference_steps": 4, "t0": 1, "t1": 2}),
    # Stable Cascade: the prior (text to image embeddings) and the decoder (image embeddings to pixels)
    "StableCascadePriorPipeline": Recipe(_cascade_prior, size=128),
    "StableCascadeDecoderPipeline": Recipe(_cascade_decoder, {"image_embeddings": _ones(1, 4, 4, 4)}),
    "StableCascadeCombinedPipeline": Recipe(_cascade_combined, {"prior_num_inference_steps": 2}, size=128),
    # HunyuanVideo (Llama + CLIP text encoders); the prompt template of the real model needs its tokenizer
    "HunyuanVideoPipeline": Recipe(_hunyuan_video, {"prompt_template": {"template": "{}", "crop_start": 0},
                                                    "max_sequence_length": 16, "num_frames": 9}, size=16),
    "StableVideoDiffusionPipeline": Recipe(_svd, {"num_frames": 2, "min_guidance_scale": 1.0,
                                                  "max_guidance_scale": 2.5}),
    # audio: CLAP-conditioned latent diffusion over mel spectrograms, a HiFi-GAN vocoder
    "AudioLDMPipeline": Recipe(_audioldm),
    "MusicLDMPipeline": Recipe(_musicldm),
    "AudioLDM2Pipeline": Recipe(_audioldm2),
    # image latents join the noise (8 channels)
    "HunyuanSkyreelsImageToVideoPipeline": Recipe(lambda: _hunyuan_video() | {
        "transformer": C.hunyuan_video_transformer(in_channels=8)}, {
        "prompt_template": {"template": "{}", "crop_start": 0}, "max_sequence_length": 16, "num_frames": 9}, size=16),
    "HunyuanVideoImageToVideoPipeline": Recipe(_hunyuan_video_i2v, {
        "prompt_template": {"template": "{}", "crop_start": 0, "image_emb_len": 49, "image_emb_start": 5,
                            "image_emb_end": 54}, "max_sequence_length": 64, "num_frames": 9}, size=16),
    "HunyuanVideoFramepackPipeline": Recipe(_hunyuan_framepack, {
        "prompt_template": {"template": "{}", "crop_start": 0}, "max_sequence_length": 64, "num_frames": 9,
        "latent_window_size": 3}),
    # a negative prompt: with classifier-free guidance and none given, EasyAnimate iterates over None
    "EasyAnimatePipeline": Recipe(_easyanimate(), {"num_frames": 5, "negative_prompt": ""}, size=16),
    # control video latents join the noise (8 channels); inpainting: the mask and the masked video's latents (9)
    "EasyAnimateControlPipeline": Recipe(_easyanimate(8), {"num_frames": 5, "negative_prompt": "",
                                                                "control_video": _pil_frames(5, 16)},
                                         size=16),
    "EasyAnimateInpaintPipeline": Recipe(_easyanimate(9), {"num_frames": 9, "negative_prompt": "",
                                                                "mask_video": _mask_video(9, 16),
                                                                "video": _video_tensor(8, 9, 16)},
                                         size=16),
    # text to video: neither an image nor a video to continue
    "HeliosPipeline": Recipe(_helios, {"max_sequence_length": 16, "num_frames": 9, "guidance_scale": 1.0,
                                       "image": None, "video": None}, size=16),
    "MotifVideoPipeline": Recipe(_motif_video(), {"max_sequence_length": 16, "num_frames": 9,
                                                "negative_prompt": "bad quality"}, size=16),
    "MotifVideoImage2VideoPipeline": Recipe(_motif_video(image=True), {"max_sequence_length": 16, "num_frames": 9,
                                                                       "negative_prompt": "bad quality"}, size=16),
    "HunyuanVideo15Pipeline": Recipe(_hunyuan_video15, {"num_frames": 9}, size=16),
    # Kandinsky 6 super-resolution: 5 frames of 16 pixels to 32, in one 32-pixel tile
    "Kandinsky6SRPipeline": Recipe(lambda: {"transformer": C.kandinsky6_sr_transformer(), "vae": C.vae_kandinsky6_sr(),
                                            "scheduler": C.flow_match()},
                                   {"video": _pil_frames(5, 16), "resolution_scale": 2}),
    # Helios pyramid: two stages, the first at half the latent size (32 pixels: latents 4, then 2, wide)
    "HeliosPyramidPipeline": Recipe(_helios_pyramid, {"max_sequence_length": 16, "num_frames": 9, "guidance_scale": 1.0,
                                                      "image": None, "video": None,
                                                      "pyramid_num_inference_steps_list": [1, 1]}),
    "HunyuanVideo15ImageToVideoPipeline": Recipe(_hunyuan_video15_i2v, {"num_frames": 9}, size=16),
    # Lucy Edit: Wan with the video to edit's latents joined to the noise (16 + 16 channels)
    "LucyEditPipeline": Recipe(_t5(lambda: C.wan_transformer(in_channels=32), C.wan_vae,
                                   _scheduler("FlowMatchEulerDiscreteScheduler", shift=7.0), umt5=True), _VIDEO,
                               size=16),
    # text to image: no image, no video to condition on
    "Cosmos3OmniPipeline": Recipe(_cosmos3, {"num_frames": 1, "guidance_scale": 1.0, "image": None, "video": None,
                                             "negative_prompt": "bad quality", "use_system_prompt": False,
                                             "add_resolution_template": False, "add_duration_template": False},
                                  size=16),
    # camera-controlled: 5 frames (2k+1 for the tiny VAE's temporal stride 2) along a seeded camera path, pinhole
    # intrinsics [fx, fy, cx, cy] of the 32-pixel first frame
    "SanaWMPipeline": Recipe(_sana_wm, {"c2w": _camera_path(5), "intrinsics": [32.0, 32.0, 16.0, 16.0],
                                        "num_frames": 5, "max_sequence_length": 16}),
    "SanaVideoPipeline": Recipe(_sana_video, _SANA_VIDEO_CALL),
    "SanaImageToVideoPipeline": Recipe(_sana_video, _SANA_VIDEO_CALL),
    # T5-conditioned video transformers
    "LattePipeline": Recipe(_t5(C.latte_transformer, lambda: C.vae_kl(blocks=(4,)), C.ddim),
                            {"video_length": 1, "clean_caption": False}, size=8),
    "WanPipeline": Recipe(_t5(C.wan_transformer, C.wan_vae, _scheduler("FlowMatchEulerDiscreteScheduler", shift=7.0),
                              umt5=True), _VIDEO, size=16),
    "LTXPipeline": Recipe(_t5(C.ltx_transformer, C.ltx_vae, C.flow_match), _VIDEO),
    "LTXImageToVideoPipeline": Recipe(_t5(C.ltx_transformer, C.ltx_vae, C.flow_match), _VIDEO),
    "WanImageToVideoPipeline": Recipe(_wan_i2v, _VIDEO, size=16),
    "WanVACEPipeline": Recipe(_wan_like(C.wan_vace_transformer), _VIDEO | {"mask": _pil_masks(9, 16)}, size=16),
    "ChronoEditPipeline": Recipe(_wan_like(C.chronoedit_transformer, image_encoder={"image_size": 32}),
                                 {"max_sequence_length": 16, "num_frames": 5}, size=16),
    "WanAnimatePipeline": Recipe(_wan_like(C.wan_animate_transformer, image_encoder={"image_size": 4}),
                                 {"max_sequence_length": 16, "pose_video": _pil_frames(9, 16),
                                  "face_video": _pil_frames(9, 16), "segment_frame_length": 77, "mode": "animate",
                                  "prev_segment_conditioning_frames": 1, "guidance_scale": 1.0}, size=16),
    "SkyReelsV2Pipeline": Recipe(_wan_like(C.skyreels_v2_transformer, _skyreels_scheduler(8.0)), _VIDEO, size=16),
    "SkyReelsV2DiffusionForcingPipeline": Recipe(_wan_like(C.skyreels_v2_transformer, _skyreels_scheduler(8.0)),
                                                 _VIDEO, size=16),
    "SkyReelsV2DiffusionForcingImageToVideoPipeline": Recipe(
        _wan_like(lambda: C.skyreels_v2_transformer(image_dim=4), _skyreels_scheduler(5.0)), _VIDEO, size=16),
    "SkyReelsV2DiffusionForcingVideoToVideoPipeline": Recipe(
        _wan_like(C.skyreels_v2_transformer, _skyreels_scheduler(5.0)),
        {"max_sequence_length": 16, "video": _pil_frames(7, 16), "num_frames": 17, "base_num_frames": 5,
         "overlap_history": 3}, size=16),
    "SkyReelsV2ImageToVideoPipeline": Recipe(
        _wan_like(lambda: C.skyreels_v2_transformer(36, image_dim=4), _skyreels_scheduler(5.0),
                  image_encoder={"image_size": 32}), _VIDEO, size=16),
    "LTX2Pipeline": Recipe(_ltx2, _LTX2_CALL),
    "LTX2ConditionPipeline": Recipe(_ltx2, _LTX2_CALL | {"conditions": _ltx2_condition("video")}),
    "LTX2InContextPipeline": Recipe(_ltx2, _LTX2_CALL | {"conditions": _ltx2_condition("video")}),
    "LTX2HDRPipeline": Recipe(_ltx2, {"max_sequence_length": 16, "num_frames": 5, "frame_rate": 25.0,
                                      "guidance_scale": 1.0, "reference_conditions": _ltx2_condition("hdr")}),
    "LTX2ImageToVideoPipeline": Recipe(_ltx2, _LTX2_CALL | {"image": _image_tensor(7, 3, 32), "image_crf": 0}),
    # distilled: its own fixed sigmas, no step count
    "LTX2DFRPipeline": Recipe(lambda: _ltx2() | {
        "transformer": C.ltx2_transformer(use_keyframes_abs_pos_embedding=True)}, {"max_sequence_length": 16, "num_frames": 5, "frame_rate": 25.0,
                                      "use_cross_timestep": False}),
    # a refine round over a previous DFR pass: its output here, seeded, in the shapes that pass returns for a
    # 5-frame 32-pixel request (7 frames on the padded canvas: 4 latent frames, the last one a keyframe at pixel 6;
    # audio unpacked, 7 latent steps of 2 mel bins)
    "LTX2DFRTemporalRefinePipeline": Recipe(lambda: _ltx2() | {
        "transformer": C.ltx2_transformer(use_keyframes_abs_pos_embedding=True),
        "scheduler": C.ltx_euler_ancestral_rf(), "temporal_latent_upsampler": C.ltx2_temporal_latent_upsampler()},
        {"max_sequence_length": 16, "num_frames": 7, "frame_rate": 25.0, "use_cross_timestep": False,
         "latents": _tensor(1, 1, 4, 4, 16, 16), "keyframes_latents": _tensor(2, 1, 4, 1, 16, 16),
         "keyframe_positions": [6], "audio_latents": _tensor(3, 1, 2, 7, 2)}),
    # protein design: two steps (one trunk pass each), the decoded atom37 coordinates compared
    "RFD4ProteinaPipeline": Recipe(lambda: {"transformer": C.rfd4_transformer(), "vae": C.rfd4_autoencoder(),
                                            "bb_ca_scheduler": C.rfd4_scheduler(),
                                            "local_latents_scheduler": C.rfd4_scheduler(), "recycle_depths": [1, 1]},
                                   {name: _protein(name) for name in (
                                       "padding_mask", "is_in_context_conditioning", "supports_local_latent",
                                       "token_type", "atom37_mask", "conditioning_features")}),
    "LTX2LatentUpsamplePipeline": Recipe(lambda: {"vae": C.ltx2_vae(), "latent_upsampler": C.ltx2_latent_upsampler()},
                                         {"num_frames": 9}),
    "LTX2VideoDiffusionDecodePipeline": Recipe(lambda: {"diffusion_decoder": C.ltx2_diffusion_decoder(),
                                                        "scheduler": C.flow_match()},
                                               {"latents": _tensor(1, 1, 8, 2, 3, 3)}),
    "LTXConditionPipeline": Recipe(_t5(C.ltx_transformer, C.ltx_vae, C.flow_match), _VIDEO),
    # no denoiser: the VAE's latents upsampled twice by the upsampler model, decoded
    "LTXLatentUpsamplePipeline": Recipe(lambda: {"vae": C.ltx_vae(), "latent_upsampler": C.ltx_latent_upsampler()},
                                        size=16),
    "CogVideoXFunControlPipeline": Recipe(_t5(lambda: C.cogvideox_transformer(in_channels=8), C.cogvideox_vae, C.ddim),
                                          {"max_sequence_length": 16, "control_video": _pil_frames(8, 16)}, size=16),
    "WanVideoToVideoPipeline": Recipe(_t5(C.wan_transformer, C.wan_vae,
                                          _scheduler("FlowMatchEulerDiscreteScheduler", shift=7.0), umt5=True),
                                      {"max_sequence_length": 16}, size=16),
    "CogVideoXVideoToVideoPipeline": Recipe(_t5(C.cogvideox_transformer, C.cogvideox_vae, C.ddim),
                                            {"max_sequence_length": 16, "strength": 0.8}, size=16),
    # image latents join the noise (8 channels); 3D RoPE needs a head dim divisible by 16
    "CogVideoXImageToVideoPipeline": Recipe(_t5(lambda: C.cogvideox_transformer(
        in_channels=8, num_attention_heads=2, attention_head_dim=16, use_rotary_positional_embeddings=True,
        use_learned_positional_embeddings=True), C.cogvideox_vae, C.ddim), {"max_sequence_length": 16, "num_frames": 8},
        size=16),
    # ConsisID: CogVideoX keeping a face's identity; the face's ArcFace embedding (id_cond) and its ViT hidden
    # states (id_vit_hidden) come from face models the pipeline does not hold: given here, shaped as Diffusers' test
    # Audio Diffusion: its steps are `steps`; the spectrogram images are compared (uint8, before Griffin-Lim): the
    # audio comes from librosa's Griffin-Lim, which starts from unseeded random phases (different on every call)
    "AudioDiffusionPipeline": Recipe(_audio_diffusion, {"steps": 2, "return_dict": False}),
    "SpectrogramDiffusionPipeline": Recipe(_spectrogram_diffusion, _SPECTROGRAM_CALL),
    "ConsisIDPipeline": Recipe(_t5(C.consisid_transformer, C.cogvideox_vae, C.ddim),
                               {"max_sequence_length": 16, "num_frames": 8, "id_cond": _ones(1, 2),
                                "id_vit_hidden": lambda: [_ones(1, 2, 2)()]}, size=16,
                               on_device=("id_cond", "id_vit_hidden")),
    "CogVideoXPipeline": Recipe(_t5(C.cogvideox_transformer, C.cogvideox_vae, C.ddim),
                                {"max_sequence_length": 16, "num_frames": 8}, size=16),
    "MochiPipeline": Recipe(_t5(C.mochi_transformer, C.mochi_vae, C.flow_match),
                            {"max_sequence_length": 16, "num_frames": 7}, size=16),
    "AllegroPipeline": Recipe(_t5(C.allegro_transformer, C.allegro_vae, C.ddim),
                              {"max_sequence_length": 16, "num_frames": 8, "clean_caption": False}, size=16),
}

# Pipeline classes that cannot be built here, with the category and the reason.
_COSMOS_GUARDRAIL = ("needs package", "its safety checker is cosmos_guardrail's (not installed; it downloads guardrail "
                     "models from the model hub), and the pipeline refuses to run without one (NVIDIA Open Model License)")
# Transformers 5.23's processors check every attribute's class, the video processor's too, even when it is None;
# video processor classes need torchvision, which this environment has not (the CPU torch wheel alone)
_QWEN_VL_PROCESSOR = ("needs package", "its Qwen-VL processor (Qwen2VLProcessor, Qwen2_5_VLProcessor or "
                      "Qwen3VLProcessor) cannot be made without torchvision (not installed): Transformers 5.23 checks "
                      "the video processor's class, a torchvision placeholder here")
UNBUILDABLE: dict[str, tuple[str, str]] = {
    "OmniGenPipeline": ("needs package", "its processor, OmniGenMultiModalProcessor, is imported only when torchvision "
                                         "is installed (not installed): __init__ fails with a NameError"),
    **{name: _COSMOS_GUARDRAIL for name in (
        "CosmosTextToWorldPipeline", "CosmosVideoToWorldPipeline", "Cosmos2TextToImagePipeline",
        "Cosmos2VideoToWorldPipeline", "Cosmos2_5_PredictBasePipeline", "Cosmos2_5_TransferPipeline")},
    **{name: _QWEN_VL_PROCESSOR for name in (
        "QwenImageEditPipeline", "QwenImageEditPlusPipeline", "QwenImageEditInpaintPipeline",
        "QwenImageLayeredPipeline", "Kandinsky5I2IPipeline", "Kandinsky5I2VPipeline", "Kandinsky6TI2VAPipeline",
        "LongCatImagePipeline", "LongCatImageEditPipeline", "BriaFibo2Pipeline", "DreamLitePipeline",
        "DreamLiteMobilePipeline", "JoyImageEditPipeline", "JoyImageEditPlusPipeline", "NucleusMoEImagePipeline",
        "QwenImage21Pipeline")}}
