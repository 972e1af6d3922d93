"""Tiny random components of Diffusers pipelines, built here from configs (no model hub, no downloads).

Sizes follow what Diffusers' own pipeline tests use (`get_dummy_components` in tests/pipelines/ of the
diffusers repository, written against Diffusers 0.40-0.42): a few channels, one or two blocks, so that a
whole pipeline runs two denoising steps in seconds. Text width is TEXT_DIM everywhere, so any text encoder
here fits any denoiser here.

Tokenizers are built locally from a small vocabulary: a character-level CLIP BPE, a T5 unigram and a
byte-level Qwen2 BPE. Their ids are what the tiny text encoders embed (vocab sizes match).
"""

from __future__ import annotations

import string

TEXT_DIM = 32  # hidden size of every tiny text encoder, and the cross-attention width of every tiny denoiser
MAX_TOKENS = 77  # CLIP's context; T5 prompts are cut to the pipeline's max_sequence_length

_CHARS = string.ascii_lowercase + string.digits + " .,!?'-"


# ---- tokenizers ----------------------------------------------------------------------------------------------

def clip_tokenizer():
    """CLIP's BPE over single characters (no merges): every prompt of lowercase text tokenizes."""
    from transformers import CLIPTokenizer
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for c in _CHARS.replace(" ", ""):
        vocab.setdefault(c, len(vocab))
        vocab.setdefault(c + "</w>", len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=MAX_TOKENS)


def t5_tokenizer():
    """A T5 unigram over single characters (ids 0-2: pad, eos, unk, as T5's)."""
    from transformers import T5Tokenizer
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -1.0)]
    pieces += [(c, -2.0) for c in _CHARS.replace(" ", "")] + [("\u2581" + c, -1.5) for c in string.ascii_lowercase]
    return T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=512)


def chatglm_tokenizer():
    """Kolors' ChatGLM tokenizer over a SentencePiece character model trained here on the characters prompts use
    (Diffusers' test loads the hub's tiny one). The tokenizer reads the model file once, at construction."""
    import io
    import os
    import tempfile

    import sentencepiece as spm
    from diffusers.pipelines.kolors import ChatGLMTokenizer
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter([_CHARS, _CHARS[::-1]]), model_writer=model,
                                   model_type="char", vocab_size=len(_CHARS) + 3, character_coverage=1.0, unk_id=0,
                                   bos_id=1, eos_id=2, pad_id=-1, num_threads=1, minloglevel=2)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "tokenizer.model")
        with open(path, "wb") as f:
            f.write(model.getvalue())
        return ChatGLMTokenizer(vocab_file=path)


def vocab_size(tokenizer) -> int:
    return len(tokenizer)


# ---- text encoders -------------------------------------------------------------------------------------------

def clip_text(tokenizer, with_projection: bool = False, hidden: int = TEXT_DIM, layers: int = 2):
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection
    cfg = CLIPTextConfig(vocab_size=vocab_size(tokenizer), hidden_size=hidden, intermediate_size=37,
                         num_hidden_layers=layers, num_attention_heads=4, max_position_embeddings=MAX_TOKENS,
                         projection_dim=hidden, bos_token_id=0, eos_token_id=1, pad_token_id=1, hidden_act="gelu")
    return (CLIPTextModelWithProjection if with_projection else CLIPTextModel)(cfg)


def t5_encoder(tokenizer, d_model: int = TEXT_DIM, umt5: bool = False):
    from transformers import T5Config, T5EncoderModel, UMT5Config, UMT5EncoderModel
    kwargs = dict(vocab_size=vocab_size(tokenizer), d_model=d_model, d_kv=8, d_ff=37, num_layers=2, num_heads=4,
                  relative_attention_num_buckets=8)
    if umt5:
        return UMT5EncoderModel(UMT5Config(**kwargs))
    return T5EncoderModel(T5Config(**kwargs))


def chatglm(tokenizer):
    """Kolors' ChatGLM3 text encoder at TEXT_DIM, with ChatGLM3's options (multi-query attention in 2 groups, qkv
    bias, RMSNorm, the original RoPE). Built with empty_init=False, and every RMSNorm weight set to 1: ChatGLMModel's
    default (empty_init=True) leaves its weights as torch.empty memory and its _init_weights does nothing, and
    RMSNorm's weight is torch.empty either way, so an unloaded model computes with whatever memory held (garbage of
    1e12 in the last layer's norms: the NaN a tiny ChatGLM gives when built from a config alone)."""
    import torch
    from diffusers.pipelines.kolors import ChatGLMModel
    from diffusers.pipelines.kolors.text_encoder import ChatGLMConfig, RMSNorm
    # ids: the SentencePiece pieces, then ChatGLM's 9 special tokens ([gMASK], sop, roles, ...)
    cfg = ChatGLMConfig(num_layers=2, padded_vocab_size=tokenizer.tokenizer.n_words + 9, hidden_size=TEXT_DIM,
                        ffn_hidden_size=37, kv_channels=8, num_attention_heads=4, seq_length=256,
                        multi_query_attention=True, multi_query_group_num=2, add_qkv_bias=True, original_rope=True,
                        use_cache=False)
    model = ChatGLMModel(cfg, empty_init=False)
    for module in model.modules():
        if isinstance(module, RMSNorm):
            torch.nn.init.ones_(module.weight)
    return model


# ---- autoencoders --------------------------------------------------------------------------------------------

def vae_kl(latent_channels: int = 4, blocks: tuple[int, ...] = (4, 8), **extra):
    """AutoencoderKL; the latent is 2**(len(blocks)-1) times smaller than the image."""
    from diffusers import AutoencoderKL
    return AutoencoderKL(block_out_channels=blocks, in_channels=3, out_channels=3, latent_channels=latent_channels,
                         down_block_types=("DownEncoderBlock2D",) * len(blocks),
                         up_block_types=("UpDecoderBlock2D",) * len(blocks), norm_num_groups=2 if blocks[0] % 2 == 0
                         else 1, sample_size=32, layers_per_block=1, **extra)


def vae_spectrogram(blocks: tuple[int, ...] = (4, 8)):
    """AutoencoderKL over one-channel images (mel spectrograms, Audio Diffusion's), one latent channel."""
    from diffusers import AutoencoderKL
    return AutoencoderKL(block_out_channels=blocks, in_channels=1, out_channels=1, latent_channels=1,
                         down_block_types=("DownEncoderBlock2D",) * len(blocks),
                         up_block_types=("UpDecoderBlock2D",) * len(blocks), norm_num_groups=2, sample_size=32,
                         layers_per_block=1)


def vae_kl_rgbd():
    """LDM3D's AutoencoderKL: RGB and a depth map (6 channels in and out)."""
    from diffusers import AutoencoderKL
    return AutoencoderKL(block_out_channels=(4, 8), in_channels=6, out_channels=6, latent_channels=4,
                         down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                         norm_num_groups=2, sample_size=32, layers_per_block=1)


def vae_flux(latent_channels: int = 1):
    """Flux/SD3-style VAE of the Flux tests: one block (no downsampling), one latent channel by default."""
    from diffusers import AutoencoderKL
    return AutoencoderKL(sample_size=32, in_channels=3, out_channels=3, block_out_channels=(4,), layers_per_block=1,
                         latent_channels=latent_channels, norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False,
                         shift_factor=0.0609, scaling_factor=1.5035)


# ---- denoisers -----------------------------------------------------------------------------------------------

def sd_unet(in_channels: int = 4, out_channels: int = 4, cross_attention_dim: int = TEXT_DIM,
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
            layers_per_block: int = 1, **extra):
    """Stable Diffusion 1.x-style UNet2DConditionModel."""
    from diffusers import UNet2DConditionModel
    return UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=layers_per_block, sample_size=16,
                                in_channels=in_channels, out_channels=out_channels,
                                down_block_types=down_block_types, up_block_types=up_block_types,
                                cross_attention_dim=cross_attention_dim, norm_num_groups=4, attention_head_dim=4,
                                **extra)


def sdxl_unet(in_channels: int = 4, layers_per_block: int = 1, **extra):
    """SDXL-style UNet: text_time conditioning on the pooled text (TEXT_DIM) and 6 time ids of width 8."""
    from diffusers import UNet2DConditionModel
    return UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=layers_per_block, sample_size=16,
                                in_channels=in_channels, out_channels=4,
                                down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim=(2, 4),
                                use_linear_projection=True, addition_embed_type="text_time",
                                addition_time_embed_dim=8, transformer_layers_per_block=(1, 2),
                                projection_class_embeddings_input_dim=80,  # 6 * 8 + 32
                                cross_attention_dim=64, norm_num_groups=4, **extra)


def unet_2d(in_channels: int = 3, sample_size: int = 16):
    """Unconditional UNet2DModel (DDPM, DDIM, PNDM...)."""
    from diffusers import UNet2DModel
    return UNet2DModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=sample_size,
                       in_channels=in_channels, out_channels=in_channels, norm_num_groups=4,
                       down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"))


def flux_transformer(in_channels: int = 4, out_channels: int | None = None, guidance: bool = False):
    from diffusers import FluxTransformer2DModel
    return FluxTransformer2DModel(patch_size=1, in_channels=in_channels, out_channels=out_channels, num_layers=1,
                                  num_single_layers=1, attention_head_dim=16, num_attention_heads=2,
                                  joint_attention_dim=TEXT_DIM, pooled_projection_dim=TEXT_DIM,
                                  axes_dims_rope=[4, 4, 8], guidance_embeds=guidance)


def sd3_transformer(channels: int = 4, num_layers: int = 1):
    from diffusers import SD3Transformer2DModel
    return SD3Transformer2DModel(sample_size=32, patch_size=1, in_channels=channels, num_layers=num_layers,
                                 attention_head_dim=8, num_attention_heads=4, caption_projection_dim=32,
                                 joint_attention_dim=TEXT_DIM, pooled_projection_dim=2 * TEXT_DIM,
                                 out_channels=channels)


def sd3_controlnet(channels: int = 4, **extra):
    """An SD3 ControlNet of one block, sized as sd3_transformer (inpainting: extra_conditioning_channels=1)."""
    from diffusers import SD3ControlNetModel
    return SD3ControlNetModel(sample_size=32, patch_size=1, in_channels=channels, num_layers=1, attention_head_dim=8,
                              num_attention_heads=4, joint_attention_dim=TEXT_DIM, caption_projection_dim=32,
                              pooled_projection_dim=2 * TEXT_DIM, out_channels=channels, **extra)


def flux_controlnet(in_channels: int = 4):
    """A Flux ControlNet sized as flux_transformer (one double and one single block)."""
    from diffusers import FluxControlNetModel
    return FluxControlNetModel(patch_size=1, in_channels=in_channels, num_layers=1, num_single_layers=1,
                               attention_head_dim=16, num_attention_heads=2, joint_attention_dim=TEXT_DIM,
                               pooled_projection_dim=TEXT_DIM, axes_dims_rope=[4, 4, 8])


def t2i_adapter(channels: tuple[int, ...], downscale_factor: int, adapter_type: str = "full_adapter"):
    """A T2I-Adapter whose features match a UNet of `channels` blocks on latents `downscale_factor` times smaller."""
    from diffusers import T2IAdapter
    return T2IAdapter(in_channels=3, channels=list(channels), num_res_blocks=1, downscale_factor=downscale_factor,
                      adapter_type=adapter_type)


def pixart_transformer(sample_size: int = 8, **extra):
    from diffusers import PixArtTransformer2DModel
    return PixArtTransformer2DModel(sample_size=sample_size, num_layers=2, patch_size=2, attention_head_dim=8,
                                    num_attention_heads=3, caption_channels=TEXT_DIM, in_channels=4,
                                    cross_attention_dim=24, out_channels=8, attention_bias=True,
                                    activation_fn="gelu-approximate", num_embeds_ada_norm=1000,
                                    norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6,
                                    **extra)


# ---- schedulers ----------------------------------------------------------------------------------------------

def ddim():
    from diffusers import DDIMScheduler
    return DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                         set_alpha_to_one=False)


def euler():
    from diffusers import EulerDiscreteScheduler
    return EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                  steps_offset=1)


def flow_match():
    from diffusers import FlowMatchEulerDiscreteScheduler
    return FlowMatchEulerDiscreteScheduler()


def ltx_euler_ancestral_rf(eta: float = 0.5):
    """LTX's ancestral (stochastic) flow step; LTX-2 DFR's temporal refine requires it, with eta > 0."""
    from diffusers import LTXEulerAncestralRFScheduler
    return LTXEulerAncestralRFScheduler(eta=eta)


def lcm():
    from diffusers import LCMScheduler
    return LCMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                        set_alpha_to_one=False)


# ---- more denoisers and conditioning models -----------------------------------------------------------------

def controlnet_for(unet):
    """A ControlNet shaped like `unet`; its condition embedder halves the image once (the VAE's factor 2)."""
    from diffusers import ControlNetModel
    return ControlNetModel.from_unet(unet, conditioning_embedding_out_channels=(4, 8))


def sdxl_controlnet_union():
    """ControlNet-Union (one model, the control type chosen per call by control_mode) shaped like sdxl_unet; its
    control-type transformer is as wide as the first UNet block (from_unet would keep SDXL's 320)."""
    from diffusers import ControlNetUnionModel
    return ControlNetUnionModel(in_channels=4, block_out_channels=(8, 16), layers_per_block=1,
                                down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), attention_head_dim=(2, 4),
                                use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=8,
                                transformer_layers_per_block=(1, 2), projection_class_embeddings_input_dim=80,
                                cross_attention_dim=64, norm_num_groups=4, conditioning_embedding_out_channels=(4, 8),
                                num_trans_channel=8, num_trans_head=2, num_trans_layer=1, num_proj_channel=8)


def dit_transformer(sample_size: int = 16):
    from diffusers import DiTTransformer2DModel
    return DiTTransformer2DModel(sample_size=sample_size, num_layers=2, patch_size=4, attention_head_dim=8,
                                 num_attention_heads=2, in_channels=4, out_channels=8, attention_bias=True,
                                 activation_fn="gelu-approximate", num_embeds_ada_norm=1000, norm_type="ada_norm_zero",
                                 norm_elementwise_affine=False)


def chroma_transformer():
    from diffusers import ChromaTransformer2DModel
    return ChromaTransformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                    attention_head_dim=16, num_attention_heads=2, joint_attention_dim=TEXT_DIM,
                                    axes_dims_rope=[4, 4, 8], approximator_hidden_dim=32, approximator_layers=1,
                                    approximator_num_channels=16)


def auraflow_transformer():
    from diffusers import AuraFlowTransformer2DModel
    return AuraFlowTransformer2DModel(sample_size=32, patch_size=2, in_channels=4, num_mmdit_layers=1,
                                      num_single_dit_layers=1, attention_head_dim=8, num_attention_heads=4,
                                      caption_projection_dim=32, joint_attention_dim=TEXT_DIM, out_channels=4,
                                      pos_embed_max_size=256)


def cogview3_transformer():
    from diffusers import CogView3PlusTransformer2DModel
    return CogView3PlusTransformer2DModel(patch_size=2, in_channels=4, num_layers=1, attention_head_dim=4,
                                          num_attention_heads=2, out_channels=4, text_embed_dim=TEXT_DIM,
                                          time_embed_dim=8, condition_dim=2, pos_embed_max_size=8, sample_size=8)


def latte_transformer():
    from diffusers import LatteTransformer3DModel
    return LatteTransformer3DModel(sample_size=8, num_layers=1, patch_size=2, attention_head_dim=8,
                                   num_attention_heads=3, caption_channels=TEXT_DIM, in_channels=4,
                                   cross_attention_dim=24, out_channels=8, attention_bias=True,
                                   activation_fn="gelu-approximate", num_embeds_ada_norm=1000,
                                   norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6)


def wan_vae():
    from diffusers import AutoencoderKLWan
    return AutoencoderKLWan(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                            temperal_downsample=[False, True, True])


def wan_transformer(in_channels: int = 16, **extra):
    from diffusers import WanTransformer3DModel
    return WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12,
                                 in_channels=in_channels, out_channels=16, text_dim=TEXT_DIM, freq_dim=256,
                                 ffn_dim=32, num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
                                 rope_max_seq_len=32, **extra)


def ltx_vae():
    from diffusers import AutoencoderKLLTXVideo
    vae = AutoencoderKLLTXVideo(in_channels=3, out_channels=3, latent_channels=8, block_out_channels=(8, 8, 8, 8),
                                decoder_block_out_channels=(8, 8, 8, 8), layers_per_block=(1, 1, 1, 1, 1),
                                decoder_layers_per_block=(1, 1, 1, 1, 1),
                                spatio_temporal_scaling=(True, True, False, False),
                                decoder_spatio_temporal_scaling=(True, True, False, False),
                                decoder_inject_noise=(False, False, False, False, False),
                                upsample_residual=(False, False, False, False), upsample_factor=(1, 1, 1, 1),
                                timestep_conditioning=False, patch_size=1, patch_size_t=1, encoder_causal=True,
                                decoder_causal=False)
    vae.use_framewise_encoding = False
    vae.use_framewise_decoding = False
    return vae


def ltx_transformer():
    from diffusers import LTXVideoTransformer3DModel
    return LTXVideoTransformer3DModel(in_channels=8, out_channels=8, patch_size=1, patch_size_t=1,
                                      num_attention_heads=4, attention_head_dim=8, cross_attention_dim=32,
                                      num_layers=1, caption_channels=TEXT_DIM)


def cogvideox_vae():
    from diffusers import AutoencoderKLCogVideoX
    return AutoencoderKLCogVideoX(in_channels=3, out_channels=3, down_block_types=("CogVideoXDownBlock3D",) * 4,
                                  up_block_types=("CogVideoXUpBlock3D",) * 4, block_out_channels=(8, 8, 8, 8),
                                  latent_channels=4, layers_per_block=1, norm_num_groups=2,
                                  temporal_compression_ratio=4)


def cogvideox_transformer(in_channels: int = 4, num_attention_heads: int = 4, attention_head_dim: int = 8, **extra):
    from diffusers import CogVideoXTransformer3DModel
    return CogVideoXTransformer3DModel(num_attention_heads=num_attention_heads, attention_head_dim=attention_head_dim,
                                       in_channels=in_channels,
                                       out_channels=4, time_embed_dim=2, text_embed_dim=TEXT_DIM, num_layers=1,
                                       sample_width=2, sample_height=2, sample_frames=9, patch_size=2,
                                       temporal_compression_ratio=4, max_text_seq_length=16, **extra)


def consisid_transformer():
    """CogVideoX with ConsisID's face branch (the local facial extractor and its cross-attention every block), sized
    as Diffusers' test_consisid.py: 8 input channels (noise and the reference image's latents)."""
    from diffusers import ConsisIDTransformer3DModel
    return ConsisIDTransformer3DModel(
        num_attention_heads=2, attention_head_dim=16, in_channels=8, out_channels=4, time_embed_dim=2,
        text_embed_dim=TEXT_DIM, num_layers=1, sample_width=2, sample_height=2, sample_frames=9, patch_size=2,
        temporal_compression_ratio=4, max_text_seq_length=16, use_rotary_positional_embeddings=True,
        use_learned_positional_embeddings=True, cross_attn_interval=1, is_kps=False, is_train_face=True,
        cross_attn_dim_head=1, cross_attn_num_heads=1, LFE_id_dim=2, LFE_vit_dim=2, LFE_depth=5, LFE_dim_head=8,
        LFE_num_heads=2, LFE_num_id_token=1, LFE_num_querie=1, LFE_output_dim=21, LFE_ff_mult=1, LFE_num_scale=1)


def mochi_vae():
    from diffusers import AutoencoderKLMochi
    return AutoencoderKLMochi(latent_channels=12, out_channels=3, encoder_block_out_channels=(32, 32, 32, 32),
                              decoder_block_out_channels=(32, 32, 32, 32), layers_per_block=(1, 1, 1, 1, 1))


def mochi_transformer():
    from diffusers import MochiTransformer3DModel
    return MochiTransformer3DModel(patch_size=2, num_attention_heads=2, attention_head_dim=8, num_layers=2,
                                   pooled_projection_dim=16, in_channels=12, out_channels=None, qk_norm="rms_norm",
                                   text_embed_dim=TEXT_DIM, time_embed_dim=4, activation_fn="swiglu",
                                   max_sequence_length=16)


def allegro_vae():
    from diffusers import AutoencoderKLAllegro
    vae = AutoencoderKLAllegro(in_channels=3, out_channels=3, down_block_types=("AllegroDownBlock3D",) * 4,
                               up_block_types=("AllegroUpBlock3D",) * 4, block_out_channels=(8, 8, 8, 8),
                               latent_channels=4, layers_per_block=1, norm_num_groups=2, temporal_compression_ratio=4)
    vae.enable_tiling()
    return vae


def allegro_transformer():
    from diffusers import AllegroTransformer3DModel
    return AllegroTransformer3DModel(num_attention_heads=2, attention_head_dim=12, in_channels=4, out_channels=4,
                                     num_layers=1, cross_attention_dim=24, sample_width=8, sample_height=8,
                                     sample_frames=8, caption_channels=TEXT_DIM)


def kandinsky_unet(in_channels: int = 4, addition_embed_type: str = "image", encoder_hid_dim_type: str = "image_proj"):
    """Kandinsky 2.2's decoder UNet: conditioned on a CLIP image embedding (TEXT_DIM wide), not on text
    (addition_embed_type="image_hint": and on a control image, the ControlNet pipelines). Kandinsky 2.1's
    is the same UNet conditioned on text and image ("text_image", "text_image_proj": kandinsky21_unet)."""
    from diffusers import UNet2DConditionModel
    return UNet2DConditionModel(in_channels=in_channels, out_channels=8, addition_embed_type=addition_embed_type,
                                down_block_types=("ResnetDownsampleBlock2D", "SimpleCrossAttnDownBlock2D"),
                                up_block_types=("SimpleCrossAttnUpBlock2D", "ResnetUpsampleBlock2D"),
                                mid_block_type="UNetMidBlock2DSimpleCrossAttn", block_out_channels=(32, 64),
                                layers_per_block=1, encoder_hid_dim=TEXT_DIM, encoder_hid_dim_type=encoder_hid_dim_type,
                                cross_attention_dim=32, attention_head_dim=4, resnet_time_scale_shift="scale_shift",
                                class_embed_type=None)


def movq(blocks: int = 2):
    """Kandinsky's MoVQ image decoder (a VQModel with spatial norm); the latent is 2**(blocks-1) times smaller."""
    from diffusers import VQModel
    channels = [32, 64] if blocks == 2 else [32] * (blocks - 2) + [64, 64]
    return VQModel(block_out_channels=channels,
                   down_block_types=["DownEncoderBlock2D"] * (blocks - 1) + ["AttnDownEncoderBlock2D"],
                   in_channels=3, latent_channels=4, layers_per_block=1, norm_num_groups=8, norm_type="spatial",
                   num_vq_embeddings=12, out_channels=3,
                   up_block_types=["AttnUpDecoderBlock2D"] + ["UpDecoderBlock2D"] * (blocks - 1), vq_embed_dim=4)


def bert_tokenizer():
    """A WordPiece tokenizer over single characters (BERT's special tokens first)."""
    from transformers import BertTokenizer
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(_CHARS.replace(" ", ""))
    tokens += ["##" + c for c in _CHARS.replace(" ", "")]
    return BertTokenizer(vocab={t: i for i, t in enumerate(tokens)}, model_max_length=MAX_TOKENS)


def bert_text(tokenizer, hidden: int = TEXT_DIM):
    from transformers import BertConfig, BertModel
    return BertModel(BertConfig(vocab_size=vocab_size(tokenizer), hidden_size=hidden, num_hidden_layers=2,
                                num_attention_heads=4, intermediate_size=37, max_position_embeddings=128))


def hunyuandit_transformer():
    from diffusers import HunyuanDiT2DModel
    return HunyuanDiT2DModel(sample_size=16, num_layers=2, patch_size=2, attention_head_dim=8, num_attention_heads=3,
                             in_channels=4, cross_attention_dim=TEXT_DIM, cross_attention_dim_t5=TEXT_DIM,
                             pooled_projection_dim=16, hidden_size=24, activation_fn="gelu-approximate")


def gemma_tokenizer():
    """Gemma's BPE over single characters (no merges), its special tokens first."""
    from transformers import GemmaTokenizer
    vocab = {t: i for i, t in enumerate(["<pad>", "<eos>", "<bos>", "<unk>", "\u2581"])}
    for c in _CHARS.replace(" ", ""):
        vocab.setdefault(c, len(vocab))
        vocab.setdefault("\u2581" + c, len(vocab))
    return GemmaTokenizer(vocab=vocab, merges=[], add_bos_token=True)  # as Gemma: an empty prompt is [<bos>]


def gemma2_text(tokenizer, hidden: int = 8):
    from transformers import Gemma2Config, Gemma2Model
    return Gemma2Model(Gemma2Config(head_dim=16, hidden_size=hidden, intermediate_size=64, num_attention_heads=2,
                                    num_hidden_layers=1, num_key_value_heads=2, vocab_size=vocab_size(tokenizer),
                                    attn_implementation="eager"))


def sana_transformer(**extra):
    from diffusers import SanaTransformer2DModel
    return SanaTransformer2DModel(patch_size=1, in_channels=4, out_channels=4, num_layers=1, num_attention_heads=2,
                                  attention_head_dim=4, num_cross_attention_heads=2, cross_attention_head_dim=4,
                                  cross_attention_dim=8, caption_channels=8, sample_size=32, **extra)


def vae_dc():
    from diffusers import AutoencoderDC
    return AutoencoderDC(in_channels=3, latent_channels=4, attention_head_dim=2,
                         encoder_block_types=("ResBlock", "EfficientViTBlock"),
                         decoder_block_types=("ResBlock", "EfficientViTBlock"), encoder_block_out_channels=(8, 8),
                         decoder_block_out_channels=(8, 8), encoder_qkv_multiscales=((), (5,)),
                         decoder_qkv_multiscales=((), (5,)), encoder_layers_per_block=(1, 1),
                         decoder_layers_per_block=[1, 1], downsample_block_type="conv",
                         upsample_block_type="interpolate", decoder_norm_types="rms_norm", decoder_act_fns="silu",
                         scaling_factor=0.41407)


_QWEN_SPECIAL = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>"]


def qwen2_tokenizer():
    """Qwen2's byte-level BPE over the 256 byte symbols (no merges), with its chat and vision special tokens."""
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import Qwen2Tokenizer
    vocab: dict[str, int] = {}
    for ch in sorted(ByteLevel.alphabet()):  # sorted: alphabet() is a set, in a different order at each call
        vocab.setdefault(ch, len(vocab))
    for t in ["<|endoftext|>"] + _QWEN_SPECIAL:
        vocab[t] = len(vocab)
    tok = Qwen2Tokenizer(vocab=vocab, merges=[], unk_token=None, bos_token=None, eos_token="<|endoftext|>",
                         pad_token="<|endoftext|>")
    tok.add_special_tokens({"additional_special_tokens": _QWEN_SPECIAL})
    return tok


def qwen25_vl(tokenizer, hidden: int = 16):
    """Qwen2.5-VL (QwenImage's text encoder), two tiny layers; vision token ids are the tokenizer's."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    ids = tokenizer.convert_tokens_to_ids
    cfg = Qwen2_5_VLConfig(
        text_config={"hidden_size": hidden, "intermediate_size": 16, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": vocab_size(tokenizer),
                     "rope_scaling": {"mrope_section": [hidden // 16, hidden // 16, hidden // 8],  # head_dim / 2
                                      "rope_type": "default", "type": "default"},
                     "rope_theta": 1000000.0},
        vision_config={"depth": 2, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": hidden},
        hidden_size=hidden, vocab_size=vocab_size(tokenizer), vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"), vision_token_id=ids("<|image_pad|>"),
        image_token_id=ids("<|image_pad|>"))
    return Qwen2_5_VLForConditionalGeneration(cfg).eval()


def qwenimage_transformer(in_channels: int = 16):
    from diffusers import QwenImageTransformer2DModel
    return QwenImageTransformer2DModel(patch_size=2, in_channels=in_channels, out_channels=4, num_layers=2,
                                       attention_head_dim=16, num_attention_heads=3, joint_attention_dim=16,
                                       guidance_embeds=False, axes_dims_rope=(8, 4, 4))


def qwenimage_vae(z_dim: int = 4):
    from diffusers import AutoencoderKLQwenImage
    return AutoencoderKLQwenImage(base_dim=z_dim * 6, z_dim=z_dim, dim_mult=[1, 2, 4], num_res_blocks=1,
                                  temperal_downsample=[False, True], latents_mean=[0.0] * z_dim,
                                  latents_std=[1.0] * z_dim)


# Qwen's chat format (what Z-Image's prompt encoding renders), without the model hub's template file
# (a message's content is a string, or a list of parts of which the text parts are rendered, as Qwen2-VL's template)
_QWEN_CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
                       "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for part in m['content'] %}"
                       "{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
                       "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def qwen2_chat_tokenizer():
    tok = qwen2_tokenizer()
    tok.chat_template = _QWEN_CHAT_TEMPLATE
    return tok


def qwen3_text(tokenizer, hidden: int = 16):
    from transformers import Qwen3Config, Qwen3Model
    return Qwen3Model(Qwen3Config(hidden_size=hidden, intermediate_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  num_key_value_heads=2, vocab_size=vocab_size(tokenizer), max_position_embeddings=512))


def zimage_transformer(**extra):
    """Z-Image's transformer (Qwen3's 16-wide text); Omni: siglip_feat_dim, the SigLIP 2 features of its images."""
    import torch
    from diffusers import ZImageTransformer2DModel
    model = ZImageTransformer2DModel(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=16, dim=32, n_layers=2,
                                     n_refiner_layers=1, n_heads=2, n_kv_heads=2, norm_eps=1e-5, qk_norm=True,
                                     cap_feat_dim=16, rope_theta=256.0, t_scale=1000.0, axes_dims=[8, 4, 4],
                                     axes_lens=[256, 32, 32], **extra)
    with torch.no_grad():  # created with torch.empty: fixed values, or the run reads uninitialized memory
        model.x_pad_token.fill_(1.0)
        model.cap_pad_token.fill_(1.0)
    return model


def qwen3_causal_lm(tokenizer, hidden: int = 16):
    from transformers import Qwen3Config, Qwen3ForCausalLM
    return Qwen3ForCausalLM(Qwen3Config(hidden_size=hidden, intermediate_size=16, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=2,
                                        vocab_size=vocab_size(tokenizer), max_position_embeddings=512))


def flux2_transformer(guidance: bool = False):
    """Flux.2's transformer (text: one layer's 16-wide states); guidance: FLUX.2 [dev]'s embedded guidance (Klein
    has none)."""
    from diffusers import Flux2Transformer2DModel
    return Flux2Transformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                   attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                   timestep_guidance_channels=256, axes_dims_rope=[4, 4, 4, 4],
                                   guidance_embeds=guidance)


def vae_flux2():
    from diffusers import AutoencoderKLFlux2
    return AutoencoderKLFlux2(sample_size=32, in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",),
                              up_block_types=("UpDecoderBlock2D",), block_out_channels=(4,), layers_per_block=1,
                              latent_channels=1, norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False)


def kandinsky3_unet():
    from diffusers import Kandinsky3UNet
    return Kandinsky3UNet(in_channels=4, time_embedding_dim=4, groups=2, attention_head_dim=4, layers_per_block=3,
                          block_out_channels=(32, 64), cross_attention_dim=4, encoder_hid_dim=TEXT_DIM)


def gemma_causal_lm(tokenizer, hidden: int = 8):
    """Gemma (Lumina-Next's text encoder: its last hidden states)."""
    from transformers import GemmaConfig, GemmaForCausalLM
    return GemmaForCausalLM(GemmaConfig(head_dim=2, hidden_size=hidden, intermediate_size=37, num_attention_heads=4,
                                        num_hidden_layers=2, num_key_value_heads=4, vocab_size=vocab_size(tokenizer)))


def lumina_next_transformer():
    from diffusers import LuminaNextDiT2DModel
    return LuminaNextDiT2DModel(sample_size=4, patch_size=2, in_channels=4, hidden_size=4, num_layers=2,
                                num_attention_heads=1, num_kv_heads=1, multiple_of=16, ffn_dim_multiplier=None,
                                norm_eps=1e-5, learn_sigma=True, qk_norm=True, cross_attention_dim=8,
                                scaling_factor=1.0)


def lumina2_transformer():
    from diffusers import Lumina2Transformer2DModel
    return Lumina2Transformer2DModel(sample_size=4, patch_size=2, in_channels=4, hidden_size=8, num_layers=2,
                                     num_attention_heads=1, num_kv_heads=1, multiple_of=16, ffn_dim_multiplier=None,
                                     norm_eps=1e-5, scaling_factor=1.0, axes_dim_rope=[4, 2, 2], cap_feat_dim=8)


def motion_adapter(block_out_channels=(8, 16), **extra):
    """AnimateDiff's temporal layers for a UNet of these blocks."""
    from diffusers import MotionAdapter
    return MotionAdapter(block_out_channels=block_out_channels, motion_layers_per_block=1, motion_norm_num_groups=2,
                         motion_num_attention_heads=4, **extra)


def cascade_prior():
    """Stable Cascade's prior (stage C): text to image embeddings."""
    from diffusers import StableCascadeUNet
    return StableCascadeUNet(conditioning_dim=128, block_out_channels=(128, 128), num_attention_heads=(2, 2),
                             down_num_layers_per_block=(1, 1), up_num_layers_per_block=(1, 1), switch_level=(False,),
                             clip_image_in_channels=768, clip_text_in_channels=TEXT_DIM,
                             clip_text_pooled_in_channels=TEXT_DIM, dropout=(0.1, 0.1))


def cascade_decoder():
    """Stable Cascade's decoder (stage B): image embeddings to Paella VQ latents."""
    from diffusers import StableCascadeUNet
    attn = ["SDCascadeResBlock", "SDCascadeTimestepBlock", "SDCascadeAttnBlock"]
    return StableCascadeUNet(in_channels=4, out_channels=4, conditioning_dim=128, block_out_channels=[16, 32, 64, 128],
                             num_attention_heads=[-1, -1, 1, 2], down_num_layers_per_block=[1, 1, 1, 1],
                             up_num_layers_per_block=[1, 1, 1, 1], down_blocks_repeat_mappers=[1, 1, 1, 1],
                             up_blocks_repeat_mappers=[3, 3, 2, 2], block_types_per_layer=[attn[:2], attn[:2], attn, attn],
                             switch_level=None, clip_text_pooled_in_channels=TEXT_DIM, dropout=[0.1, 0.1, 0.1, 0.1])


def paella_vq():
    from diffusers.pipelines.deprecated.wuerstchen.modeling_paella_vq_model import PaellaVQModel
    return PaellaVQModel(bottleneck_blocks=1, num_vq_embeddings=2)


def clip_vision(image_size: int = 32, hidden: int = 4, patch_size: int = 1):
    """A CLIP image encoder with projection (Wan image-to-video's image conditioning, Kandinsky's prior) and its
    image processor."""
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModelWithProjection
    model = CLIPVisionModelWithProjection(CLIPVisionConfig(hidden_size=hidden, projection_dim=hidden,
                                                           num_hidden_layers=2, num_attention_heads=2,
                                                           image_size=image_size, intermediate_size=16,
                                                           patch_size=patch_size))
    return model, CLIPImageProcessor(crop_size=image_size, size=image_size)


def llama_text(tokenizer, hidden: int = 16):
    from transformers import LlamaConfig, LlamaModel
    return LlamaModel(LlamaConfig(hidden_size=hidden, intermediate_size=37, num_attention_heads=4, num_hidden_layers=2,
                                  vocab_size=vocab_size(tokenizer), hidden_act="gelu"))


def hunyuan_video_transformer(in_channels: int = 4, **extra):
    from diffusers import HunyuanVideoTransformer3DModel
    return HunyuanVideoTransformer3DModel(**{
        "in_channels": in_channels, "out_channels": 4, "num_attention_heads": 2, "attention_head_dim": 10,
        "num_layers": 1, "num_single_layers": 1, "num_refiner_layers": 1, "patch_size": 1, "patch_size_t": 1,
        "guidance_embeds": True, "text_embed_dim": 16, "pooled_projection_dim": 8, "rope_axes_dim": (2, 4, 4)} | extra)


def llava(tokenizer, hidden: int = 16):
    """LLaVA (HunyuanVideo image-to-video's text encoder): a two-layer Llama and a CLIP vision tower of 224-pixel
    images in 32-pixel patches (49 image features, which replace 49 image tokens in the prompt)."""
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration
    pad, image = tokenizer.pad_token_id, tokenizer.convert_tokens_to_ids("<|image_pad|>")
    text = LlamaConfig(hidden_size=hidden, intermediate_size=37, num_attention_heads=4, num_hidden_layers=2,
                       vocab_size=vocab_size(tokenizer), hidden_act="gelu", pad_token_id=pad)
    vision = CLIPVisionConfig(hidden_size=8, intermediate_size=37, projection_dim=32, num_attention_heads=4,
                              num_hidden_layers=2, image_size=224)
    return LlavaForConditionalGeneration(LlavaConfig(vision_config=vision, text_config=text, pad_token_id=pad,
                                                     image_token_index=image)).eval()


def hunyuan_video_vae():
    from diffusers import AutoencoderKLHunyuanVideo
    return AutoencoderKLHunyuanVideo(in_channels=3, out_channels=3, latent_channels=4,
                                     down_block_types=("HunyuanVideoDownBlock3D",) * 4,
                                     up_block_types=("HunyuanVideoUpBlock3D",) * 4, block_out_channels=(8, 8, 8, 8),
                                     layers_per_block=1, act_fn="silu", norm_num_groups=4, scaling_factor=0.476986,
                                     spatial_compression_ratio=8, temporal_compression_ratio=4,
                                     mid_block_add_attention=True)


def hunyuan_video_vae_16():
    """HunyuanVideo's causal 3D VAE with 16 latent channels (Kandinsky 5's video VAE), two blocks."""
    from diffusers import AutoencoderKLHunyuanVideo
    return AutoencoderKLHunyuanVideo(act_fn="silu", block_out_channels=[32, 64],
                                     down_block_types=["HunyuanVideoDownBlock3D"] * 2, in_channels=3, latent_channels=16,
                                     layers_per_block=1, mid_block_add_attention=False, norm_num_groups=32,
                                     out_channels=3, scaling_factor=0.476986, spatial_compression_ratio=8,
                                     temporal_compression_ratio=4, up_block_types=["HunyuanVideoUpBlock3D"] * 2)


def sana_controlnet():
    from diffusers import SanaControlNetModel
    return SanaControlNetModel(patch_size=1, in_channels=4, out_channels=4, num_layers=1, num_attention_heads=2,
                               attention_head_dim=4, num_cross_attention_heads=2, cross_attention_head_dim=4,
                               cross_attention_dim=8, caption_channels=8, sample_size=32)


def sparse_controlnet(block_out_channels=(8, 16)):
    """AnimateDiff's SparseCtrl ControlNet shaped like sd_unet (its condition embedder halves the image once)."""
    from diffusers import SparseControlNetModel
    return SparseControlNetModel(block_out_channels=block_out_channels, layers_per_block=1, in_channels=4,
                                 conditioning_channels=3, down_block_types=("DownBlockMotion", "CrossAttnDownBlockMotion"),
                                 cross_attention_dim=TEXT_DIM, conditioning_embedding_out_channels=(4, 8),
                                 norm_num_groups=4, attention_head_dim=4, motion_num_attention_heads=4,
                                 use_simplified_condition_embedding=False)


def prior_transformer():
    """Kandinsky's prior (text embedding to CLIP image embedding, TEXT_DIM wide)."""
    import torch
    from diffusers import PriorTransformer
    model = PriorTransformer(num_attention_heads=2, attention_head_dim=12, embedding_dim=TEXT_DIM, num_layers=1)
    with torch.no_grad():  # clip_std starts at 0: every output would be clip_mean (Diffusers' tests set it to 1 too)
        model.clip_std.fill_(1.0)
    return model


def ltx_latent_upsampler():
    from diffusers.pipelines.ltx.modeling_latent_upsampler import LTXLatentUpsamplerModel
    return LTXLatentUpsamplerModel(in_channels=8, mid_channels=32, num_blocks_per_stage=1, dims=3,
                                   spatial_upsample=True, temporal_upsample=False)


def hunyuandit_controlnet():
    """A HunyuanDiT ControlNet sized as hunyuandit_transformer."""
    from diffusers import HunyuanDiT2DControlNetModel
    return HunyuanDiT2DControlNetModel(sample_size=16, transformer_num_layers=2, patch_size=2, attention_head_dim=8,
                                       num_attention_heads=3, in_channels=4, cross_attention_dim=TEXT_DIM,
                                       cross_attention_dim_t5=TEXT_DIM, pooled_projection_dim=16, hidden_size=24,
                                       activation_fn="gelu-approximate")


def wan_vace_transformer():
    """Wan VACE: Wan's transformer with control blocks after layers 0 and 2 (96 control channels)."""
    from diffusers import WanVACETransformer3DModel
    return WanVACETransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16,
                                     out_channels=16, text_dim=TEXT_DIM, freq_dim=256, ffn_dim=32, num_layers=3,
                                     cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
                                     vace_layers=[0, 2], vace_in_channels=96)


def wan_animate_transformer():
    from diffusers import WanAnimateTransformer3DModel
    return WanAnimateTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12,
                                        in_channels=36, latent_channels=16, out_channels=16, text_dim=TEXT_DIM,
                                        freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
                                        qk_norm="rms_norm_across_heads", image_dim=4, rope_max_seq_len=32,
                                        motion_encoder_channel_sizes={"4": 16, "8": 16, "16": 16},
                                        motion_encoder_size=16, motion_style_dim=8, motion_dim=4, motion_encoder_dim=16,
                                        face_encoder_hidden_dim=16, face_encoder_num_heads=2,
                                        inject_face_latents_blocks=2)


def skyreels_v2_transformer(in_channels: int = 16, **extra):
    from diffusers import SkyReelsV2Transformer3DModel
    return SkyReelsV2Transformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12,
                                        in_channels=in_channels, out_channels=16, text_dim=TEXT_DIM, freq_dim=256,
                                        ffn_dim=32, num_layers=2, cross_attn_norm=True,
                                        qk_norm="rms_norm_across_heads", rope_max_seq_len=32, **extra)


def qwenimage_controlnet(extra_condition_channels: int = 0):
    """A QwenImage ControlNet sized as qwenimage_transformer (inpainting: the mask, one more latent channel, is 4
    more once packed in 2x2 patches)."""
    from diffusers import QwenImageControlNetModel
    return QwenImageControlNetModel(patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16,
                                    num_attention_heads=3, joint_attention_dim=16, axes_dims_rope=(8, 4, 4),
                                    extra_condition_channels=extra_condition_channels)


def zimage_controlnet(control_in_dim: int = 16):
    """A Z-Image ControlNet sized as zimage_transformer (the pipeline shares the transformer's embedders with it);
    control_in_dim 33 is the inpainting kind: control latents, the mask and the masked image's latents."""
    from diffusers import ZImageControlNetModel
    return ZImageControlNetModel(control_layers_places=[0], control_refiner_layers_places=[0],
                                 control_in_dim=control_in_dim, all_patch_size=(2,), all_f_patch_size=(1,), dim=32,
                                 n_refiner_layers=1, n_heads=2, n_kv_heads=2, norm_eps=1e-5, qk_norm=True)


def unet_3d(**extra):
    """ModelScope text-to-video's UNet3DConditionModel, sized as sd_unet."""
    from diffusers import UNet3DConditionModel
    return UNet3DConditionModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=16, in_channels=4,
                                out_channels=4, down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
                                up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"), cross_attention_dim=TEXT_DIM,
                                attention_head_dim=4, norm_num_groups=4, **extra)


def i2vgenxl_unet():
    from diffusers import I2VGenXLUNet
    return I2VGenXLUNet(block_out_channels=(8, 16), layers_per_block=1, sample_size=16, in_channels=4, out_channels=4,
                        down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
                        up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"), cross_attention_dim=TEXT_DIM,
                        attention_head_dim=4, num_attention_heads=None, norm_num_groups=4)


def vq_model(latent_channels: int = 3, blocks=(32, 64), **extra):
    """A VQModel (latent diffusion's autoencoder); the latent is 2**(len(blocks)-1) times smaller."""
    from diffusers import VQModel
    return VQModel(block_out_channels=list(blocks), in_channels=3, out_channels=3,
                   down_block_types=["DownEncoderBlock2D"] * len(blocks), up_block_types=["UpDecoderBlock2D"] * len(blocks),
                   latent_channels=latent_channels, **extra)


def unet_1d():
    """Dance Diffusion's UNet1DModel over stereo audio."""
    from diffusers import UNet1DModel
    return UNet1DModel(block_out_channels=(32, 32, 64), extra_in_channels=16, time_embedding_dim=16,  # 16 extra: time
                       sample_size=512, sample_rate=16000,
                       in_channels=2, out_channels=2, flip_sin_to_cos=True, use_timestep_embedding=False,
                       time_embedding_type="fourier", mid_block_type="UNetMidBlock1D",
                       down_block_types=("DownBlock1DNoSkip", "DownBlock1D", "AttnDownBlock1D"),
                       up_block_types=("AttnUpBlock1D", "UpBlock1D", "UpBlock1DNoSkip"))


def sd_upscale_unet():
    """The x4 upscaler's UNet: latents plus the low-resolution image (7 channels), the noise level as a class."""
    from diffusers import UNet2DConditionModel
    return UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=16, in_channels=7,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=TEXT_DIM,
                                attention_head_dim=4, norm_num_groups=4, use_linear_projection=True,
                                num_class_embeds=100)


def sd_latent_upscale_unet():
    """The x2 latent upscaler's K-diffusion UNet (Fourier time embedding, K blocks, no mid block), as Diffusers'
    tests size it (its norms take groups of 32 channels, its time embedding is sized from 4 levels)."""
    from diffusers import UNet2DConditionModel
    return UNet2DConditionModel(act_fn="gelu", attention_head_dim=8, norm_num_groups=None,
                                block_out_channels=[32, 32, 64, 64], time_cond_proj_dim=160, conv_in_kernel=1,
                                conv_out_kernel=1, cross_attention_dim=TEXT_DIM,
                                down_block_types=("KDownBlock2D",) + ("KCrossAttnDownBlock2D",) * 3, in_channels=8,
                                mid_block_type=None, only_cross_attention=False, out_channels=5,
                                resnet_time_scale_shift="scale_shift", time_embedding_type="fourier",
                                timestep_post_act="gelu", up_block_types=("KCrossAttnUpBlock2D",) * 3 + ("KUpBlock2D",))


_ROBERTA_SPECIAL = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def roberta_tokenizer():
    """RoBERTa's byte-level BPE over the 256 byte symbols (no merges), its special tokens first (CLAP's tokenizer)."""
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import RobertaTokenizer
    vocab = {t: i for i, t in enumerate(_ROBERTA_SPECIAL)}
    for ch in sorted(ByteLevel.alphabet()):  # sorted: alphabet() is a set
        vocab.setdefault(ch, len(vocab))
    return RobertaTokenizer(vocab=vocab, merges=[], model_max_length=MAX_TOKENS)


_CLAP_TEXT = {"bos_token_id": 0, "eos_token_id": 2, "hidden_size": 8, "intermediate_size": 37, "num_attention_heads": 1,
              "num_hidden_layers": 1, "pad_token_id": 1, "projection_dim": 8}
_CLAP_AUDIO = {"spec_size": 8, "window_size": 4, "num_mel_bins": 8, "intermediate_size": 37, "depths": [1, 1],
               "num_attention_heads": [1, 1], "num_hidden_layers": 1, "hidden_size": 192, "projection_dim": 8,
               "patch_size": 2, "patch_stride": 2, "patch_embed_input_channels": 4}


def clap_text(tokenizer):
    """CLAP's text tower with its projection (AudioLDM's text encoder): 8-wide text embeddings."""
    from transformers import ClapTextConfig, ClapTextModelWithProjection
    return ClapTextModelWithProjection(ClapTextConfig(vocab_size=vocab_size(tokenizer), **_CLAP_TEXT))


def clap(tokenizer, projection_dim: int = 16):
    """The whole CLAP model, text and audio towers (MusicLDM's and AudioLDM 2's text encoder)."""
    from transformers import ClapConfig, ClapModel
    return ClapModel(ClapConfig(text_config={"vocab_size": vocab_size(tokenizer), **_CLAP_TEXT},
                                audio_config=_CLAP_AUDIO, projection_dim=projection_dim))


def clap_feature_extractor():
    from transformers import ClapFeatureExtractor
    return ClapFeatureExtractor(hop_length=7900)


def vae_audio():
    """A mel-spectrogram VAE (one channel)."""
    from diffusers import AutoencoderKL
    return AutoencoderKL(block_out_channels=[8, 16], in_channels=1, out_channels=1, norm_num_groups=8,
                         down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
                         latent_channels=4)


def hifigan():
    """SpeechT5's HiFi-GAN vocoder: 8 mel bins to a waveform."""
    from transformers import SpeechT5HifiGan, SpeechT5HifiGanConfig
    return SpeechT5HifiGan(SpeechT5HifiGanConfig(model_in_dim=8, sampling_rate=16000, upsample_initial_channel=16,
                                                 upsample_rates=[2, 2], upsample_kernel_sizes=[4, 4],
                                                 resblock_kernel_sizes=[3, 7],
                                                 resblock_dilation_sizes=[[1, 3, 5], [1, 3, 5]],
                                                 normalize_before=False))


def audioldm_unet(class_dim: int = 8):
    """AudioLDM's UNet: the text embedding enters as a class embedding (concatenated to the time embedding)."""
    from diffusers import UNet2DConditionModel
    return UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=1, norm_num_groups=8, sample_size=32,
                                in_channels=4, out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=(8, 16),
                                class_embed_type="simple_projection", projection_class_embeddings_input_dim=class_dim,
                                class_embeddings_concat=True)


def audioldm2_unet():
    from diffusers import AudioLDM2UNet2DConditionModel
    return AudioLDM2UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=1, norm_num_groups=8,
                                         sample_size=32, in_channels=4, out_channels=4,
                                         down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                         up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=(8, 16))


def gpt2_lm():
    from transformers import GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config(n_embd=16, n_head=1, n_layer=1, vocab_size=1000, n_ctx=99, n_positions=99))
    model.config.max_new_tokens = 8  # AudioLDM 2 generates this many embeddings
    return model


def svd_unet():
    from diffusers import UNetSpatioTemporalConditionModel
    return UNetSpatioTemporalConditionModel(block_out_channels=(32, 64), layers_per_block=1, sample_size=32,
                                            in_channels=8, out_channels=4,
                                            down_block_types=("CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"),
                                            up_block_types=("UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"),
                                            cross_attention_dim=32, num_attention_heads=8,
                                            projection_class_embeddings_input_dim=96, addition_time_embed_dim=32)


def if_unet(super_resolution: bool = False):
    """DeepFloyd IF's pixel-space UNet (T5-conditioned); the super-resolution stage also takes the low-resolution
    image (6 channels) and its noise level as a class."""
    from diffusers import UNet2DConditionModel
    extra = dict(class_embed_type="timestep", mid_block_scale_factor=1.414, time_embedding_act_fn="gelu",
                 time_embedding_dim=32) if super_resolution else {}
    return UNet2DConditionModel(sample_size=32, layers_per_block=1, block_out_channels=[32, 64],
                                down_block_types=["ResnetDownsampleBlock2D", "SimpleCrossAttnDownBlock2D"],
                                mid_block_type="UNetMidBlock2DSimpleCrossAttn",
                                up_block_types=["SimpleCrossAttnUpBlock2D", "ResnetUpsampleBlock2D"],
                                in_channels=6 if super_resolution else 3, out_channels=6, cross_attention_dim=32,
                                encoder_hid_dim=TEXT_DIM, attention_head_dim=8, addition_embed_type="text",
                                addition_embed_type_num_heads=2, cross_attention_norm="group_norm",
                                resnet_time_scale_shift="scale_shift", act_fn="gelu", **extra)


def unclip_unet():
    """Stable unCLIP's UNet: the noised CLIP image embedding (and its noise level embedding) enters as a class."""
    from diffusers import UNet2DConditionModel
    return UNet2DConditionModel(sample_size=32, in_channels=4, out_channels=4,
                                down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), block_out_channels=(8, 16),
                                norm_num_groups=4, attention_head_dim=(2, 4), class_embed_type="projection",
                                projection_class_embeddings_input_dim=2 * TEXT_DIM, cross_attention_dim=TEXT_DIM,
                                layers_per_block=1, upcast_attention=True, use_linear_projection=True)


def wuerstchen_prior():
    from diffusers.pipelines.deprecated.wuerstchen import WuerstchenPrior
    return WuerstchenPrior(c_in=2, c=8, depth=2, c_cond=TEXT_DIM, c_r=8, nhead=2)


def wuerstchen_decoder():
    from diffusers.pipelines.deprecated.wuerstchen import WuerstchenDiffNeXt
    return WuerstchenDiffNeXt(c_in=4, c_cond=TEXT_DIM, c_hidden=[32], nhead=[-1], blocks=[2], level_config=["CT"],
                              clip_embd=TEXT_DIM, inject_effnet=[False], effnet_embd=2)


def paint_by_example_encoder():
    """Paint-by-Example's image encoder (CLIP vision + a mapper) and its image processor."""
    from transformers import CLIPImageProcessor, CLIPVisionConfig
    from diffusers.pipelines.deprecated.paint_by_example import PaintByExampleImageEncoder
    config = CLIPVisionConfig(hidden_size=TEXT_DIM, projection_dim=TEXT_DIM, intermediate_size=37, num_attention_heads=4,
                              num_hidden_layers=2, image_size=32, patch_size=4)
    return PaintByExampleImageEncoder(config, proj_size=TEXT_DIM), CLIPImageProcessor(crop_size=32, size=32)


def ldm_bert(tokenizer):
    """LDM's BERT text encoder (latent diffusion text-to-image)."""
    from diffusers.pipelines.latent_diffusion.pipeline_latent_diffusion import LDMBertConfig, LDMBertModel
    return LDMBertModel(LDMBertConfig(d_model=TEXT_DIM, encoder_attention_heads=4, head_dim=8, encoder_ffn_dim=37,
                                      encoder_layers=2, vocab_size=vocab_size(tokenizer), max_position_embeddings=77))


def xlm_roberta_tokenizer():
    """An XLM-RoBERTa unigram over single characters (its special tokens first: <s>, <pad>, </s>, <unk>)."""
    from transformers import XLMRobertaTokenizer
    pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -1.0)]
    pieces += [(c, -2.0) for c in _CHARS.replace(" ", "")] + [("\u2581" + c, -1.5) for c in string.ascii_lowercase]
    return XLMRobertaTokenizer(vocab=pieces + [("<mask>", 0.0)], model_max_length=MAX_TOKENS)


def multilingual_clip(tokenizer):
    """Kandinsky 2.1's text encoder: XLM-RoBERTa with a linear map to CLIP's text space."""
    from diffusers.pipelines.kandinsky.text_encoder import MCLIPConfig, MultilingualCLIP
    return MultilingualCLIP(MCLIPConfig(numDims=TEXT_DIM, transformerDimensions=TEXT_DIM, hidden_size=TEXT_DIM,
                                        intermediate_size=37, num_attention_heads=4, num_hidden_layers=2,
                                        vocab_size=vocab_size(tokenizer)))


def kandinsky21_unet(in_channels: int = 4):
    """Kandinsky 2.1's decoder UNet: conditioned on text (MCLIP) and a CLIP image embedding."""
    return kandinsky_unet(in_channels, addition_embed_type="text_image", encoder_hid_dim_type="text_image_proj")


def gemma3(tokenizer, hidden: int = 16, layers: int = 2):
    """Gemma 3 (text and a tiny SigLIP vision tower): LTX-2's text encoder reads all its hidden states."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration
    config = Gemma3Config(
        text_config={"hidden_size": hidden, "intermediate_size": 32, "num_hidden_layers": layers,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
                     "vocab_size": vocab_size(tokenizer), "sliding_window": 16, "max_position_embeddings": 512},
        vision_config={"hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": 16, "patch_size": 4},
        mm_tokens_per_image=4, boi_token_index=0, eoi_token_index=1, image_token_index=3)
    return Gemma3ForConditionalGeneration(config).eval()


def ltx2_transformer(caption_channels: int = 32, **extra):
    """LTX-2's audio-video transformer (use_keyframes_abs_pos_embedding: LTX-2.5's keyframe marker, for DFR)."""
    from diffusers import LTX2VideoTransformer3DModel
    return LTX2VideoTransformer3DModel(in_channels=4, out_channels=4, patch_size=1, patch_size_t=1,
                                       num_attention_heads=2, attention_head_dim=8, cross_attention_dim=16,
                                       audio_in_channels=4, audio_out_channels=4, audio_num_attention_heads=2,
                                       audio_attention_head_dim=4, audio_cross_attention_dim=8, num_layers=2,
                                       qk_norm="rms_norm_across_heads", caption_channels=caption_channels,
                                       rope_double_precision=False, rope_type="split", **extra)


def ltx2_connectors(caption_channels: int = 32, text_layers: int = 2):
    """The text connectors (4 heads of 8: as wide as the text encoder, 32)."""
    from diffusers.pipelines.ltx2 import LTX2TextConnectors
    return LTX2TextConnectors(caption_channels=caption_channels, text_proj_in_factor=text_layers + 1,
                              video_connector_num_attention_heads=4, video_connector_attention_head_dim=8,
                              video_connector_num_layers=1, video_connector_num_learnable_registers=None,
                              audio_connector_num_attention_heads=4, audio_connector_attention_head_dim=8,
                              audio_connector_num_layers=1, audio_connector_num_learnable_registers=None,
                              connector_rope_base_seq_len=32, rope_theta=10000.0, rope_double_precision=False,
                              causal_temporal_positioning=False, rope_type="split")


def ltx2_vae():
    from diffusers import AutoencoderKLLTX2Video
    vae = AutoencoderKLLTX2Video(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8,),
                                 decoder_block_out_channels=(8,), layers_per_block=(1,), decoder_layers_per_block=(1, 1),
                                 spatio_temporal_scaling=(True,), decoder_spatio_temporal_scaling=(True,),
                                 decoder_inject_noise=(False, False), downsample_type=("spatial",),
                                 upsample_residual=(False,), upsample_factor=(1,), timestep_conditioning=False,
                                 patch_size=1, patch_size_t=1, encoder_causal=True, decoder_causal=False)
    vae.use_framewise_encoding = False
    vae.use_framewise_decoding = False
    return vae


def ltx2_audio_vae():
    from diffusers import AutoencoderKLLTX2Audio
    return AutoencoderKLLTX2Audio(base_channels=4, output_channels=2, ch_mult=(1,), num_res_blocks=1,
                                  attn_resolutions=None, in_channels=2, resolution=32, latent_channels=2,
                                  norm_type="pixel", causality_axis="height", dropout=0.0,
                                  mid_block_add_attention=False, sample_rate=16000, mel_hop_length=160, is_causal=True,
                                  mel_bins=8)


def ltx2_vocoder():
    from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder
    return LTX2Vocoder(in_channels=2 * 8, hidden_channels=32, out_channels=2, upsample_kernel_sizes=[4, 4],
                       upsample_factors=[2, 2], resnet_kernel_sizes=[3], resnet_dilations=[[1, 3, 5]],
                       leaky_relu_negative_slope=0.1, output_sampling_rate=16000)


def ltx2_latent_upsampler():
    from diffusers.pipelines.ltx2 import LTX2LatentUpsamplerModel
    return LTX2LatentUpsamplerModel(in_channels=4, mid_channels=32, num_blocks_per_stage=1)


def rfd4_transformer():
    """RFD4-Proteína's denoiser with the released feature set (every conditioning feature it reads), tiny widths."""
    from diffusers import RFD4ProteinaTransformer
    return RFD4ProteinaTransformer(nlayers=2, token_dim=16, nheads=2, dim_cond=16, pair_repr_dim=8, latent_dim=4,
                                   token_type_emb_dim=4, cath_emb_dim=4, t_emb_dim=8, seq_sep_dim=4,
                                   xt_pair_dist_dim=4, tri_mult_c=8)


def rfd4_autoencoder():
    """Its autoencoder; the residue tables (atom37 slots per residue type, residue types per token type) are seeded
    random booleans of the released shapes (147 residue types, 7 token types)."""
    import torch
    from diffusers import RFD4ProteinaAutoencoder
    g = torch.Generator().manual_seed(0)
    return RFD4ProteinaAutoencoder(atom37_mask=(torch.rand(147, 37, generator=g) < 0.5).tolist(),
                                   allowed_residue_types=(torch.rand(7, 147, generator=g) < 0.5).tolist(),
                                   latent_dim=4, nlayers=1, token_dim=16, nheads=2, dim_cond=16, pair_repr_dim=8,
                                   token_type_emb_dim=4)


def rfd4_scheduler():
    """One modality's sampler; one fine tail interval, so a 2-step schedule is valid (steps >= tail_steps * 2)."""
    from diffusers import RFD4ProteinaScheduler
    return RFD4ProteinaScheduler(schedule_mode="log", noise_mode="1/t", tsr_k=1.0, tsr_sigma=1.0, tail_steps=1,
                                 tail_step_multiplier=2)


def ltx2_temporal_latent_upsampler():
    """The upsampler that doubles the latent frame count (not the size): DFR's temporal refine round."""
    from diffusers.pipelines.ltx2 import LTX2LatentUpsamplerModel
    return LTX2LatentUpsamplerModel(in_channels=4, mid_channels=32, num_blocks_per_stage=1, spatial_upsample=False,
                                    temporal_upsample=True)


def ltx2_diffusion_decoder():
    """LTX-2's diffusion decoder (latents to pixels by denoising), as Diffusers' tests size it; latent statistics
    that are not the identity (a run that skipped denormalizing would differ)."""
    import torch
    from diffusers import LTX2VideoDiffusionDecoderModel
    model = LTX2VideoDiffusionDecoderModel(
        out_channels=3, latent_channels=8, patch_size=2, decoder_head_dim=16, decoder_stage_channels=(64, 32, 16, 16, 16),
        decoder_stage_depths=(1, 1, 1, 1, 2), decoder_stage_kernels=((3, 3, 3),) * 4,
        decoder_upsample_strides=((1, 2, 2), (2, 1, 1), (2, 2, 2), (2, 2, 2)),
        decoder_upsample_channel_reductions=(2, 2, 1, 1), decoder_stage5_kernel=(3, 3, 3), decoder_t_emb_dim=32,
        spatial_compression_ratio=16, temporal_compression_ratio=8)
    with torch.no_grad():
        model.latents_mean.copy_(torch.linspace(-0.1, 0.1, 8))
        model.latents_std.copy_(torch.linspace(0.5, 1.5, 8))
    return model



def kandinsky5_transformer(in_text_dim: int = 32, in_text_dim2: int = 16):
    from diffusers import Kandinsky5Transformer3DModel
    return Kandinsky5Transformer3DModel(in_visual_dim=16, in_text_dim=in_text_dim, in_text_dim2=in_text_dim2,
                                        time_dim=16, out_visual_dim=16, patch_size=(1, 2, 2), model_dim=16, ff_dim=32,
                                        num_text_blocks=1, num_visual_blocks=2, axes_dims=(1, 1, 2), visual_cond=False,
                                        attention_type="regular")


def hunyuan_framepack_transformer():
    from diffusers import HunyuanVideoFramepackTransformer3DModel
    return HunyuanVideoFramepackTransformer3DModel(in_channels=4, out_channels=4, num_attention_heads=2,
                                                   attention_head_dim=10, num_layers=1, num_single_layers=1,
                                                   num_refiner_layers=1, patch_size=2, patch_size_t=1,
                                                   guidance_embeds=True, text_embed_dim=16, pooled_projection_dim=8,
                                                   rope_axes_dim=(2, 4, 4), image_condition_type=None,
                                                   has_image_proj=True, image_proj_dim=32, has_clean_x_embedder=True)


def siglip_vision(hidden: int = 32, image_size: int = 30):
    """A SigLIP image encoder and its image processor."""
    from transformers import SiglipImageProcessor, SiglipVisionConfig, SiglipVisionModel
    model = SiglipVisionModel(SiglipVisionConfig(hidden_size=hidden, intermediate_size=37, num_hidden_layers=2,
                                                 num_attention_heads=4, image_size=image_size, patch_size=2))
    return model, SiglipImageProcessor(size={"height": image_size, "width": image_size})


def qwen2_vl(tokenizer, hidden: int = 16):
    """Qwen2-VL (EasyAnimate's text encoder), two tiny layers."""
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration
    ids = tokenizer.convert_tokens_to_ids
    cfg = Qwen2VLConfig(
        text_config={"hidden_size": hidden, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "num_key_value_heads": 2, "vocab_size": vocab_size(tokenizer),
                     "rope_scaling": {"mrope_section": [hidden // 16, hidden // 16, hidden // 8], "rope_type": "default",
                                      "type": "default"}},
        vision_config={"depth": 2, "embed_dim": 16, "hidden_size": hidden, "num_heads": 2},
        vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"),
        vision_token_id=ids("<|image_pad|>"), image_token_id=ids("<|image_pad|>"))
    return Qwen2VLForConditionalGeneration(cfg).eval()


def easyanimate_transformer(in_channels: int = 4):
    from diffusers import EasyAnimateTransformer3DModel
    return EasyAnimateTransformer3DModel(num_attention_heads=2, attention_head_dim=16, in_channels=in_channels,
                                         out_channels=4, time_embed_dim=2, text_embed_dim=16, num_layers=1,
                                         sample_width=16, sample_height=16, patch_size=2)


def magvit_vae():
    from diffusers import AutoencoderKLMagvit
    return AutoencoderKLMagvit(in_channels=3, out_channels=3,
                               down_block_types=("SpatialDownBlock3D",) + ("SpatialTemporalDownBlock3D",) * 3,
                               up_block_types=("SpatialUpBlock3D",) + ("SpatialTemporalUpBlock3D",) * 3,
                               block_out_channels=(8, 8, 8, 8), latent_channels=4, layers_per_block=1,
                               norm_num_groups=2, spatial_group_norm=False)


def cogview4_transformer(in_channels: int = 4):
    from diffusers import CogView4Transformer2DModel
    return CogView4Transformer2DModel(patch_size=2, in_channels=in_channels, num_layers=2, attention_head_dim=4,
                                      num_attention_heads=4, out_channels=4, text_embed_dim=32, time_embed_dim=8,
                                      condition_dim=4)


def glm(tokenizer, hidden: int = 32):
    from transformers import GlmConfig, GlmForCausalLM
    return GlmForCausalLM(GlmConfig(hidden_size=hidden, intermediate_size=8, num_hidden_layers=2, num_attention_heads=4,
                                    head_dim=8, vocab_size=vocab_size(tokenizer), pad_token_id=tokenizer.pad_token_id))


def sana_video_transformer():
    from diffusers import SanaVideoTransformer3DModel
    return SanaVideoTransformer3DModel(in_channels=16, out_channels=16, num_attention_heads=2, attention_head_dim=12,
                                       num_layers=2, num_cross_attention_heads=2, cross_attention_head_dim=12,
                                       cross_attention_dim=24, caption_channels=8, mlp_ratio=2.5, dropout=0.0,
                                       attention_bias=False, sample_size=8, patch_size=(1, 2, 2),
                                       norm_elementwise_affine=False, norm_eps=1e-6, qk_norm="rms_norm_across_heads",
                                       rope_max_seq_len=32)


def sana_wm_transformer(vae_temporal_stride: int):
    """SANA-WM's camera-controlled DiT (no tiny configuration in Diffusers' tests: its __init__'s own options at tiny
    widths): Plücker camera attention in every block, chunk Plücker channels 6 per frame of a latent's temporal
    chunk (the VAE's temporal stride), float32 (the released model is bf16), over LTX-2 latents of 4 channels."""
    from diffusers import SanaWMTransformer3DModel
    return SanaWMTransformer3DModel(in_channels=4, num_layers=2, hidden_size=32, num_attention_heads=2,
                                    softmax_every_n=2, linear_head_dim=16,
                                    chunk_plucker_channels=6 * vae_temporal_stride, chunk_plucker_post_attn_blocks=2,
                                    image_size=32, caption_channels=8, mixed_precision="fp32")


def chronoedit_transformer():
    """ChronoEdit: Wan image-to-video's transformer (image latents and mask join the noise: 36 channels)."""
    from diffusers import ChronoEditTransformer3DModel
    return ChronoEditTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12,
                                        in_channels=36, out_channels=16, text_dim=TEXT_DIM, freq_dim=256, ffn_dim=32,
                                        num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
                                        rope_max_seq_len=32, image_dim=4)


def helios_transformer():
    from diffusers import HeliosTransformer3DModel
    return HeliosTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16,
                                    out_channels=16, text_dim=TEXT_DIM, freq_dim=256, ffn_dim=32, num_layers=2,
                                    cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_dim=(4, 4, 4),
                                    has_multi_term_memory_patch=True, guidance_cross_attn=True,
                                    zero_history_timestep=True, is_amplify_history=False)


def t5gemma2_encoder(tokenizer, hidden: int = 32, vision: bool = False):
    """T5Gemma 2's encoder (Motif-Video's text encoder); vision: with its SigLIP tower (4 wide, 16-pixel images),
    which encodes image-to-video's first frame."""
    from transformers import SiglipVisionConfig, T5Gemma2Encoder, T5Gemma2EncoderConfig, T5Gemma2TextConfig
    text_config = T5Gemma2TextConfig(hidden_size=hidden, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=vocab_size(tokenizer), max_position_embeddings=128,
                                     head_dim=16, num_key_value_heads=2, dropout_rate=0.0)
    vision_config = SiglipVisionConfig(hidden_size=4, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                       image_size=16, patch_size=4, num_channels=3) if vision else None
    return T5Gemma2Encoder(T5Gemma2EncoderConfig(text_config=text_config, vision_config=vision_config)).eval()


def motif_video_transformer(image_embed_dim: int | None = None):
    from diffusers import MotifVideoTransformer3DModel
    return MotifVideoTransformer3DModel(in_channels=33, out_channels=16, num_attention_heads=2, attention_head_dim=12,
                                        num_layers=1, num_single_layers=1, mlp_ratio=4.0, patch_size=1,
                                        patch_size_t=1, qk_norm="rms_norm", text_embed_dim=32, rope_axes_dim=(4, 4, 4),
                                        **({"image_embed_dim": image_embed_dim} if image_embed_dim else {}))


def hunyuan_video15_transformer(task_type: str = "t2v"):
    """HunyuanVideo 1.5's transformer; image embeddings 12 wide (siglip_vision(hidden=12)) for image to video."""
    from diffusers import HunyuanVideo15Transformer3DModel
    return HunyuanVideo15Transformer3DModel(in_channels=9, out_channels=4, num_attention_heads=2, attention_head_dim=8,
                                            num_layers=1, num_refiner_layers=1, mlp_ratio=2.0, patch_size=1,
                                            patch_size_t=1, text_embed_dim=16, text_embed_2_dim=32,
                                            image_embed_dim=12, rope_axes_dim=(2, 2, 4), target_size=16,
                                            task_type=task_type)


def hunyuan_video15_vae():
    from diffusers import AutoencoderKLHunyuanVideo15
    return AutoencoderKLHunyuanVideo15(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(16, 16),
                                       layers_per_block=1, spatial_compression_ratio=4, temporal_compression_ratio=2,
                                       downsample_match_channel=False, upsample_match_channel=False)


def qwen25_vl_text(tokenizer, hidden: int = 16):
    """Qwen2.5-VL's language model alone (HunyuanVideo 1.5's text encoder)."""
    from transformers import Qwen2_5_VLTextConfig, Qwen2_5_VLTextModel
    return Qwen2_5_VLTextModel(Qwen2_5_VLTextConfig(
        hidden_size=hidden, intermediate_size=16, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
        vocab_size=vocab_size(tokenizer), rope_theta=1000000.0,
        rope_scaling={"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"}))


def krea2_transformer():
    from diffusers import Krea2Transformer2DModel
    return Krea2Transformer2DModel(in_channels=16, num_layers=2, attention_head_dim=8, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=32, timestep_embed_dim=8,
                                   text_hidden_dim=16, num_text_layers=3, text_num_attention_heads=2,
                                   text_num_key_value_heads=1, text_intermediate_size=16, num_layerwise_text_blocks=1,
                                   num_refiner_text_blocks=1, axes_dims_rope=(4, 2, 2), rope_theta=1000.0)


def qwen3_vl(tokenizer, hidden: int = 16, layers: int = 2):
    from transformers import Qwen3VLConfig, Qwen3VLModel
    return Qwen3VLModel(Qwen3VLConfig(
        text_config={"hidden_size": hidden, "intermediate_size": 16, "num_hidden_layers": layers, "num_attention_heads": 2,
                     "num_key_value_heads": 2, "head_dim": 8, "vocab_size": vocab_size(tokenizer)},
        vision_config={"depth": 2, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": hidden},
        vocab_size=vocab_size(tokenizer))).eval()


def ovis_transformer():
    from diffusers import OvisImageTransformer2DModel
    return OvisImageTransformer2DModel(patch_size=1, in_channels=4, out_channels=4, num_layers=1, num_single_layers=1,
                                       attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                       axes_dims_rope=(4, 4, 8))


def bria_transformer():
    from diffusers import BriaTransformer2DModel
    return BriaTransformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=8,
                                  num_attention_heads=2, joint_attention_dim=TEXT_DIM, pooled_projection_dim=None,
                                  axes_dims_rope=[0, 4, 4])


def prx_transformer(pixel: bool = False):
    """PRX's transformer over latents (T5Gemma's 8-wide text); pixel: over RGB pixels (Qwen3's 16-wide text), with
    its bottleneck image embedder and resolution embeddings."""
    from diffusers import PRXTransformer2DModel
    if pixel:
        return PRXTransformer2DModel(patch_size=1, in_channels=3, context_in_dim=16, hidden_size=8, mlp_ratio=2.0,
                                     num_heads=2, depth=1, axes_dim=[2, 2], bottleneck_size=8, resolution_embeds=True)
    return PRXTransformer2DModel(patch_size=1, in_channels=4, context_in_dim=8, hidden_size=8, mlp_ratio=2.0,
                                 num_heads=2, depth=1, axes_dim=[2, 2])


def t5gemma_encoder(tokenizer):
    """T5Gemma's encoder (PRX's text encoder), one tiny layer."""
    from transformers import T5GemmaConfig, T5GemmaEncoder, T5GemmaModuleConfig
    params = {"vocab_size": vocab_size(tokenizer), "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
              "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "max_position_embeddings": 64,
              "layer_types": ["full_attention"], "attention_bias": False, "attention_dropout": 0.0,
              "dropout_rate": 0.0, "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-06,
              "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 4,
              "rope_theta": 10000.0, "sliding_window": 4096}
    config = T5GemmaConfig(encoder=T5GemmaModuleConfig(**params), is_encoder_decoder=False, **params)
    return T5GemmaEncoder(config.encoder).eval()


def cosmos3_transformer(tokenizer):
    from diffusers import Cosmos3OmniTransformer
    return Cosmos3OmniTransformer(head_dim=6, hidden_act="relu2", hidden_size=6, intermediate_size=12, latent_channel=16,
                                  latent_patch_size=1, num_attention_heads=1, num_hidden_layers=1,
                                  num_key_value_heads=1, patch_latent_dim=16, qk_norm_for_text=False, rms_norm_eps=1e-5,
                                  rope_axes_dim=[1, 1, 1], vocab_size=vocab_size(tokenizer))


def unclip_decoder():
    """unCLIP's decoder: a pixel-space UNet (mean and variance out) conditioned on the text projected by
    unclip_text_proj (cross attention of its width, 100) and on the CLIP image embedding as a class."""
    from diffusers import UNet2DConditionModel
    return UNet2DConditionModel(sample_size=32, in_channels=3, out_channels=6, block_out_channels=(32, 64),
                                down_block_types=("ResnetDownsampleBlock2D", "SimpleCrossAttnDownBlock2D"),
                                up_block_types=("SimpleCrossAttnUpBlock2D", "ResnetUpsampleBlock2D"),
                                mid_block_type="UNetMidBlock2DSimpleCrossAttn", layers_per_block=1,
                                cross_attention_dim=100, attention_head_dim=4, resnet_time_scale_shift="scale_shift",
                                class_embed_type="identity")


def unclip_text_proj():
    """unCLIP's text projection: CLIP text and image embeddings (TEXT_DIM) to the decoder's time and context widths."""
    from diffusers.pipelines.deprecated.unclip.text_proj import UnCLIPTextProjModel
    return UnCLIPTextProjModel(clip_embeddings_dim=TEXT_DIM, time_embed_dim=128, cross_attention_dim=100)


def unclip_super_res():
    """unCLIP's super-resolution UNet (the decoder's image and the noise: 6 channels in)."""
    from diffusers import UNet2DModel
    return UNet2DModel(sample_size=64, layers_per_block=1, in_channels=6, out_channels=3, block_out_channels=(32, 64),
                       down_block_types=("ResnetDownsampleBlock2D",) * 2, up_block_types=("ResnetUpsampleBlock2D",) * 2)


def unet_flat(**extra):
    """Versatile Diffusion's text UNet (UNetFlatConditionModel) shaped as sd_unet: its attention blocks join the
    image UNet's (the pipeline swaps or pairs them)."""
    from diffusers.pipelines.deprecated.versatile_diffusion.modeling_text_unet import UNetFlatConditionModel
    return UNetFlatConditionModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=16, in_channels=4,
                                  out_channels=4, down_block_types=("DownBlockFlat", "CrossAttnDownBlockFlat"),
                                  up_block_types=("CrossAttnUpBlockFlat", "UpBlockFlat"),
                                  cross_attention_dim=TEXT_DIM, norm_num_groups=4, attention_head_dim=4, **extra)


def shap_e_prior(image: bool = False):
    """Shap-E's prior: a PriorTransformer over 32 latent tokens of 16, conditioned on a 16-wide CLIP embedding
    (image: the CLIP image encoder's patch states, layer-normed)."""
    import torch
    from diffusers import PriorTransformer
    model = PriorTransformer(num_attention_heads=2, attention_head_dim=16, embedding_dim=16, num_embeddings=32,
                             embedding_proj_dim=16, time_embed_dim=64, num_layers=1, clip_embed_dim=32,
                             additional_embeddings=0, time_embed_act_fn="gelu", norm_in_type="layer",
                             encoder_hid_proj_type=None, added_emb_type=None,
                             **({"embedding_proj_norm_type": "layer"} if image else {}))
    with torch.no_grad():  # clip_std starts at 0: every latent would be clip_mean (as prior_transformer's)
        model.clip_std.fill_(1.0)
    return model


def shap_e_renderer():
    """Shap-E's NeRF/STF renderer, 8 wide, for 16-wide latents."""
    from diffusers.pipelines.shap_e import ShapERenderer
    return ShapERenderer(param_shapes=((8, 93), (8, 8), (8, 8), (8, 8)), d_latent=16, d_hidden=8, n_output=12,
                         background=(0.1, 0.1, 0.1))


def roberta_series(tokenizer):
    """AltDiffusion's text encoder: XLM-RoBERTa with a projection to TEXT_DIM."""
    from diffusers.pipelines.deprecated.alt_diffusion.modeling_roberta_series import (
        RobertaSeriesConfig, RobertaSeriesModelWithTransformation)
    return RobertaSeriesModelWithTransformation(RobertaSeriesConfig(
        hidden_size=TEXT_DIM, project_dim=TEXT_DIM, intermediate_size=37, num_attention_heads=4, num_hidden_layers=2,
        vocab_size=vocab_size(tokenizer), max_position_embeddings=MAX_TOKENS + 2))


def vq_diffusion_transformer(classes: int = 12):
    """VQ-Diffusion's transformer over a 12x12 grid of VQ codes (`classes` of them, plus the mask class)."""
    from diffusers import Transformer2DModel
    return Transformer2DModel(attention_bias=True, cross_attention_dim=TEXT_DIM, attention_head_dim=144,
                              num_attention_heads=1, num_vector_embeds=classes, num_embeds_ada_norm=12,
                              norm_num_groups=32, sample_size=12, activation_fn="geglu-approximate")


def stable_audio3_transformer(cond_dim: int = 8, local_cond_dim: int = 5):
    """Stable Audio 3's DiT over 8 latent channels, conditioned on text states and the duration (`cond_dim` wide:
    t5gemma_encoder's width); inpainting adds the masked latents and the mask per frame (local_cond_dim 9)."""
    from diffusers.models.transformers.transformer_stable_audio3 import StableAudio3DiTModel
    return _without_zero_init(StableAudio3DiTModel(
        io_channels=8, patch_size=1, embed_dim=32, depth=2, num_heads=4, cond_token_dim=cond_dim,
        global_cond_dim=cond_dim, local_add_cond_dim=local_cond_dim, timestep_features_dim=16, ff_mult=2,
        num_memory_tokens=3, use_differential_attention=False))


def vae_same():
    """Stable Audio 3's autoencoder (stereo, 16 samples a second, 8 latent channels)."""
    from diffusers.models.autoencoders.autoencoder_same import AutoencoderSAME
    return _without_zero_init(AutoencoderSAME(audio_channels=2, patch_size=2, encoder_channels=8, encoder_c_mults=(2,),
                                              encoder_strides=(2,), encoder_transformer_depths=(1,), latent_dim=8,
                                              use_differential_attention=False, dim_heads=4, ff_mult=2,
                                              sampling_rate=16))


def stable_audio_transformer():
    """Stable Audio (Open)'s DiT: 3 latent channels, 4-wide text and 8-wide global conditions."""
    from diffusers import StableAudioDiTModel
    return StableAudioDiTModel(sample_size=4, in_channels=3, num_layers=2, attention_head_dim=4,
                               num_key_value_attention_heads=2, out_channels=3, cross_attention_dim=4,
                               time_proj_dim=8, global_states_input_dim=8, cross_attention_input_dim=4)


def vae_oobleck():
    """Stable Audio's Oobleck autoencoder (stereo, 3 latent channels)."""
    from diffusers import AutoencoderOobleck
    return AutoencoderOobleck(encoder_hidden_size=6, downsampling_ratios=[1, 2], decoder_channels=3,
                              decoder_input_channels=3, audio_channels=2, channel_multiples=[2, 4], sampling_rate=4)


def _without_zero_init(model, std: float = 0.2):
    """`model` with the weights its constructor zero-initialises (branch outputs that start as the identity, as
    in a model before training) drawn at random instead: otherwise a tiny random model's output does not depend
    on its input, and comparing it compares nothing."""
    import torch
    with torch.no_grad():
        for p in model.parameters():
            if not p.any():
                p.normal_(0.0, std)
    return model


def hidream_transformer():
    """HiDream-I1's MoE transformer: T5 states (TEXT_DIM) and two Llama layers' states (16) as captions, the two
    pooled CLIP embeddings (2 x TEXT_DIM) as the text embedding."""
    from diffusers import HiDreamImageTransformer2DModel
    return HiDreamImageTransformer2DModel(patch_size=2, in_channels=4, out_channels=4, num_layers=1,
                                          num_single_layers=1, attention_head_dim=8, num_attention_heads=4,
                                          caption_channels=[TEXT_DIM, 16], text_emb_dim=2 * TEXT_DIM,
                                          num_routed_experts=4, num_activated_experts=2, axes_dims_rope=(4, 2, 2),
                                          max_resolution=(32, 32), llama_layers=(0, 1))


def llama_causal_lm(tokenizer, hidden: int = 16):
    """Llama with its LM head (HiDream's fourth text encoder: it reads the hidden states of every layer)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(hidden_size=hidden, intermediate_size=37, num_attention_heads=4,
                                        num_hidden_layers=2, vocab_size=vocab_size(tokenizer), hidden_act="gelu"))


def anyflow_transformer(far: bool = False):
    """AnyFlow's flow-map transformer (Wan-like, T5 text of TEXT_DIM); FAR: autoregressive over frame chunks, one
    latent frame a chunk (three for 9 frames)."""
    from diffusers import AnyFlowFARTransformer3DModel, AnyFlowTransformer3DModel
    common = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=16,
                  text_dim=TEXT_DIM, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
                  rope_max_seq_len=32, gate_value=0.25, deltatime_type="r")
    if far:
        return AnyFlowFARTransformer3DModel(compressed_patch_size=(1, 4, 4), full_chunk_limit=3,
                                            chunk_partition=(1, 1, 1), **common)
    return AnyFlowTransformer3DModel(**common)


def hunyuan_image_transformer(text_dim: int = 16, refiner: bool = False):
    """HunyuanImage 2.1's transformer: Qwen2.5-VL states (`text_dim`) and ByT5 glyph states (byt5_encoder's 32).
    refiner: over frames (3D patches and RoPE), the image's latents (two frames folded into 8 channels) joined to
    the noise's (16 in, 8 out), with embedded guidance."""
    from diffusers import HunyuanImageTransformer2DModel
    shape = dict(in_channels=16, out_channels=8, patch_size=(1, 1, 1), rope_axes_dim=(4, 2, 2), guidance_embeds=True) \
        if refiner else dict(in_channels=4, out_channels=4, patch_size=(1, 1), rope_axes_dim=(4, 4), guidance_embeds=False)
    return HunyuanImageTransformer2DModel(num_attention_heads=4, attention_head_dim=8, num_layers=1,
                                          num_single_layers=1, num_refiner_layers=1, text_embed_dim=text_dim,
                                          text_embed_2_dim=32, **shape)


def vae_hunyuan_image():
    """HunyuanImage 2.1's VAE (8 times smaller latents, 4 channels)."""
    from diffusers import AutoencoderKLHunyuanImage
    return AutoencoderKLHunyuanImage(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(32, 64, 64, 64),
                                     layers_per_block=1, scaling_factor=0.476986, spatial_compression_ratio=8,
                                     sample_size=128)


def byt5_encoder():
    """ByT5's encoder and its tokenizer (bytes: no vocabulary file), HunyuanImage's glyph encoder."""
    from transformers import ByT5Tokenizer, T5Config, T5EncoderModel
    tok = ByT5Tokenizer()
    return T5EncoderModel(T5Config(d_model=32, d_kv=4, d_ff=16, num_layers=2, num_heads=2,
                                   relative_attention_num_buckets=8, relative_attention_max_distance=32,
                                   vocab_size=vocab_size(tok), feed_forward_proj="gated-gelu", dense_act_fn="gelu_new",
                                   is_encoder_decoder=False, use_cache=False, tie_word_embeddings=False)), tok


def smollm3(tokenizer, hidden: int = 32):
    """SmolLM3 (Bria FIBO's text encoder: its hidden states of every layer), two tiny layers."""
    from transformers import SmolLM3Config, SmolLM3ForCausalLM
    return SmolLM3ForCausalLM(SmolLM3Config(hidden_size=hidden, intermediate_size=37, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2,
                                            vocab_size=vocab_size(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                            bos_token_id=None, eos_token_id=tokenizer.eos_token_id))


def bria_fibo_transformer():
    """Bria FIBO's transformer: SmolLM3's states (2 x 32: the last two layers' concatenated) as the text."""
    from diffusers import BriaFiboTransformer2DModel
    return BriaFiboTransformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                      attention_head_dim=8, num_attention_heads=2, joint_attention_dim=64,
                                      text_encoder_dim=32, pooled_projection_dim=None, axes_dims_rope=[0, 4, 4])


def wan22_vae():
    """Wan 2.2's residual VAE (2x2 patches in and out: 12 channels; 16 times smaller latents, 16 channels), as
    Diffusers' Bria FIBO Edit tests size it."""
    from diffusers import AutoencoderKLWan
    return AutoencoderKLWan(base_dim=80, decoder_base_dim=128, dim_mult=[1, 2, 4, 4], dropout=0.0, in_channels=12,
                            latents_mean=[0.0] * 16, latents_std=[1.0] * 16, is_residual=True, num_res_blocks=2,
                            out_channels=12, patch_size=2, scale_factor_spatial=16, scale_factor_temporal=4,
                            temperal_downsample=[False, True, True], z_dim=16)


def redux_image_encoder():
    """Flux Redux's image embedder: SigLIP states (siglip_vision's 32) to T5-width tokens (TEXT_DIM)."""
    from diffusers.pipelines.flux.modeling_flux import ReduxImageEncoder
    return ReduxImageEncoder(redux_dim=32, txt_in_features=TEXT_DIM)


def longcat_audio_dit():
    """LongCat-AudioDiT's transformer (UMT5 text of TEXT_DIM) over 8 latent channels."""
    from diffusers.models.transformers.transformer_longcat_audio_dit import LongCatAudioDiTTransformer
    return LongCatAudioDiTTransformer(dit_dim=64, dit_depth=2, dit_heads=4, dit_text_dim=TEXT_DIM, latent_dim=8,
                                      text_conv=False)


def vae_longcat_audio():
    """LongCat-AudioDiT's waveform VAE (mono, 8 latent channels, twice shorter)."""
    from diffusers.models.autoencoders.autoencoder_longcat_audio_dit import LongCatAudioDiTVae
    return LongCatAudioDiTVae(in_channels=1, channels=16, c_mults=[1, 2], strides=[2], latent_dim=8,
                              encoder_latent_dim=16, downsampling_ratio=2, sample_rate=24000)


def ideogram4_transformer(llm_features_dim: int):
    """Ideogram 4's transformer over 16 latent channels (a 2x2-patched 4-channel Flux 2 VAE latent), reading
    Qwen3-VL's states of 13 layers concatenated (`llm_features_dim`)."""
    from diffusers import Ideogram4Transformer2DModel
    return Ideogram4Transformer2DModel(in_channels=16, num_layers=2, attention_head_dim=8, num_attention_heads=4,
                                       intermediate_size=32, adaln_dim=16, llm_features_dim=llm_features_dim,
                                       rope_theta=10_000, mrope_section=(2, 1, 1), norm_eps=1e-5)


def mistral3(tokenizer, hidden: int = 16, lm_head: bool = True):
    """Mistral 3 (Mistral-Small-3.1: FLUX.2 [dev]'s text encoder, with its LM head; ERNIE-Image's, without) with a
    tiny Pixtral vision tower, one layer each."""
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration, Mistral3Model
    pad = tokenizer.pad_token_id
    config = Mistral3Config(
        text_config={"model_type": "mistral", "vocab_size": vocab_size(tokenizer), "hidden_size": hidden,
                     "intermediate_size": 37, "max_position_embeddings": 512, "num_attention_heads": 4,
                     "num_hidden_layers": 1, "num_key_value_heads": 2, "rms_norm_eps": 1e-05,
                     "rope_theta": 1000000000.0, "sliding_window": None, "pad_token_id": pad},
        vision_config={"model_type": "pixtral", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 4,
                       "intermediate_size": 37, "image_size": 30, "patch_size": 6, "num_channels": 3},
        pad_token_id=pad, image_seq_length=4, vision_feature_layer=-1,
        image_token_index=tokenizer.convert_tokens_to_ids("<|image_pad|>"))
    return (Mistral3ForConditionalGeneration if lm_head else Mistral3Model)(config).eval()


def vae_flux2_patched():
    """Flux.2's VAE with 4 latent channels in 2x2 patches (16 transformer channels): Ideogram 4's and ERNIE-Image's."""
    from diffusers import AutoencoderKLFlux2
    return AutoencoderKLFlux2(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",),
                              up_block_types=("UpDecoderBlock2D",), block_out_channels=(8,), layers_per_block=1,
                              latent_channels=4, norm_num_groups=1, sample_size=32, patch_size=(2, 2),
                              use_quant_conv=False, use_post_quant_conv=False)


def ernie_image_transformer():
    """ERNIE-Image's transformer over 16 channels (2x2-patched latents), Mistral 3's 16-wide states as the text."""
    from diffusers import ErnieImageTransformer2DModel
    return ErnieImageTransformer2DModel(hidden_size=16, num_attention_heads=1, num_layers=1, ffn_hidden_size=16,
                                        in_channels=16, out_channels=16, patch_size=1, text_in_dim=16, rope_theta=256,
                                        rope_axes_dim=(8, 4, 4), eps=1e-6, qk_layernorm=True)


def blip2_qformer(hidden: int = 8):
    """BLIP-Diffusion's Q-Former (Diffusers' own Blip2QFormerModel: a tiny BLIP-2 vision tower, 224-pixel images in
    14-pixel patches, and 8 query tokens). Its constructor loads a BERT tokenizer by name or path: bert_tokenizer()
    is saved to a temporary directory and loaded from there (no download)."""
    import tempfile
    from transformers import Blip2Config
    from diffusers.pipelines.deprecated.blip_diffusion.modeling_blip2 import Blip2QFormerModel
    with tempfile.TemporaryDirectory() as path:
        bert_tokenizer().save_pretrained(path)
        config = Blip2Config(
            vision_config={"hidden_size": hidden, "intermediate_size": 8, "num_hidden_layers": 1,
                           "num_attention_heads": 1, "image_size": 224, "patch_size": 14, "hidden_act": "quick_gelu"},
            qformer_config={"vocab_size": 1000, "hidden_size": hidden, "num_hidden_layers": 1, "num_attention_heads": 1,
                            "intermediate_size": 8, "max_position_embeddings": 512, "cross_attention_frequency": 1,
                            "encoder_hidden_size": hidden},
            num_query_tokens=8, tokenizer=path)
        return Blip2QFormerModel(config)


def context_clip_text(tokenizer, hidden: int = 8):
    """BLIP-Diffusion's text encoder: CLIP's, with the Q-Former's subject embeddings spliced into the prompt."""
    from transformers import CLIPTextConfig
    from diffusers.pipelines.deprecated.blip_diffusion.modeling_ctx_clip import ContextCLIPTextModel
    return ContextCLIPTextModel(CLIPTextConfig(vocab_size=vocab_size(tokenizer), hidden_size=hidden, intermediate_size=8,
                                               projection_dim=hidden, num_hidden_layers=1, num_attention_heads=1,
                                               max_position_embeddings=MAX_TOKENS, bos_token_id=0, eos_token_id=1,
                                               pad_token_id=1))


def siglip2_vision(hidden: int = 16):
    """A SigLIP 2 (NaFlex) image encoder, 8-pixel patches, and its image processor."""
    from transformers import Siglip2ImageProcessor, Siglip2VisionConfig, Siglip2VisionModel
    model = Siglip2VisionModel(Siglip2VisionConfig(hidden_size=hidden, intermediate_size=37, num_hidden_layers=1,
                                                   num_attention_heads=2, patch_size=8, num_patches=16))
    return model.eval(), Siglip2ImageProcessor(patch_size=8, max_num_patches=16)


# a chat template that renders each message's text (a string, or its text parts) one after another
_PLAIN_CHAT_TEMPLATE = ("{% for m in messages %}{% if m['content'] is string %}{{ m['content'] }}{% else %}"
                        "{% for part in m['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
                        "{% endfor %}{% endif %}{% endfor %}")


def diffusion_gemma(tokenizer):
    """DiffusionGemma (block diffusion over a canvas of 8 tokens): a two-layer, 16-wide Gemma 4 text model with two
    experts, and a one-layer vision tower; its processor is `tokenizer` with a plain chat template."""
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion
    tokenizer.chat_template = _PLAIN_CHAT_TEMPLATE
    unk = tokenizer.unk_token_id  # image markers: the tiny vocabulary has none (no image is given)
    config = DiffusionGemmaConfig(
        text_config={"vocab_size": vocab_size(tokenizer), "hidden_size": 16, "intermediate_size": 32,
                     "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
                     "global_head_dim": 8, "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 16,
                     "max_position_embeddings": 256, "num_experts": 2, "top_k_experts": 1, "moe_intermediate_size": 16},
        vision_config={"model_type": "gemma4_vision", "hidden_size": 16, "intermediate_size": 16,
                       "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 8},
        canvas_length=8, boi_token_id=unk, eoi_token_id=unk, image_token_id=unk)
    return DiffusionGemmaForBlockDiffusion(config).eval()


# ACE-Step's attention blocks, all of one tiny size
_ACE_STEP_ATTENTION = {"intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                       "rope_theta": 10000.0, "sliding_window": 16}


def ace_step_transformer():
    """ACE-Step's music DiT over 8 acoustic latent channels (24 in: the latents, the source and a mask)."""
    from diffusers import AceStepTransformer1DModel
    return AceStepTransformer1DModel(hidden_size=32, num_hidden_layers=2, in_channels=24, audio_acoustic_hidden_dim=8,
                                     patch_size=2, **_ACE_STEP_ATTENTION)


def ace_step_condition_encoder(text_dim: int = 32):
    """ACE-Step's condition encoder: the prompt's states (`text_dim`), the lyrics and a timbre reference."""
    from diffusers.pipelines.ace_step import AceStepConditionEncoder
    return AceStepConditionEncoder(hidden_size=32, text_hidden_dim=text_dim, timbre_hidden_dim=8,
                                   num_lyric_encoder_hidden_layers=2, num_timbre_encoder_hidden_layers=2,
                                   **_ACE_STEP_ATTENTION)


def ace_step_audio_tokenizers():
    """ACE-Step's audio tokenizer (FSQ over pooled acoustic latents) and its detokenizer."""
    from diffusers.pipelines.ace_step import AceStepAudioTokenDetokenizer, AceStepAudioTokenizer
    common = dict(hidden_size=32, audio_acoustic_hidden_dim=8, pool_window_size=2,
                  num_attention_pooler_hidden_layers=1, **_ACE_STEP_ATTENTION)
    return (AceStepAudioTokenizer(fsq_dim=32, fsq_input_levels=[4, 4, 4], fsq_input_num_quantizers=1, **common),
            AceStepAudioTokenDetokenizer(**common))


def vae_hunyuan_image_refiner():
    """HunyuanImage 2.1 refiner's causal 3D VAE (4 times smaller latents, 4 channels)."""
    from diffusers import AutoencoderKLHunyuanImageRefiner
    return AutoencoderKLHunyuanImageRefiner(latent_channels=4, block_out_channels=(8, 16, 16), layers_per_block=1,
                                            spatial_compression_ratio=4, temporal_compression_ratio=2)


def unidiffuser_model(text_dim: int = TEXT_DIM, clip_img_dim: int = TEXT_DIM, sample_size: int = 16):
    """UniDiffuser's U-ViT over three modalities at once: VAE latents (4 x sample_size^2), the CLIP image embedding
    (`clip_img_dim`) and the 77 text tokens (`text_dim`: the text decoder's prefix width)."""
    from diffusers import UniDiffuserModel
    return UniDiffuserModel(text_dim=text_dim, clip_img_dim=clip_img_dim, num_text_tokens=MAX_TOKENS,
                            num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4, num_layers=2,
                            norm_num_groups=32, sample_size=sample_size, patch_size=2, ff_final_dropout=True)


def unidiffuser_text_decoder(tokenizer):
    """UniDiffuser's caption decoder: a one-layer GPT-2 prefixed by the CLIP text states (TEXT_DIM)."""
    from diffusers import UniDiffuserTextDecoder
    return UniDiffuserTextDecoder(prefix_length=MAX_TOKENS, prefix_inner_dim=TEXT_DIM, prefix_hidden_dim=TEXT_DIM,
                                  vocab_size=vocab_size(tokenizer), n_positions=128, n_embd=TEXT_DIM, n_layer=1,
                                  n_head=4, n_inner=37)


def kandinsky6_sr_transformer():
    """Kandinsky 6 super-resolution's transformer over 4 latent channels (the noise, the low-resolution latents and
    an anchor mask in: 9), one block, trained (here: set) for 32-pixel tiles; its NABLA sparse attention is
    FlexAttention."""
    from diffusers import Kandinsky6SRTransformer3DModel
    return Kandinsky6SRTransformer3DModel(in_visual_dim=4, out_visual_dim=4, time_dim=16, patch_size=(1, 2, 2),
                                          model_dim=32, ff_dim=64, num_visual_blocks=1, axes_dims=(4, 2, 2),
                                          tile_sizes=((32, 32),), nabla_window=(3, 3, 3))


def vae_kandinsky6_sr():
    """Kandinsky 6 super-resolution's video VAE, two levels (twice smaller latents, 4 times fewer frames)."""
    from diffusers import Kandinsky6SRVAE
    return Kandinsky6SRVAE(latent_channels=4, encoder_block_out_channels=(8, 16), decoder_block_out_channels=(8, 16),
                           layers_per_block=1, temporal_compression_ratio=4, temporal_compression_start_level=1)


def glm_image_transformer(text_dim: int = 32):
    """GLM-Image's DiT: ByT5 glyph states (`text_dim`) and the AR model's prior image tokens (a 128-code book)."""
    from diffusers import GlmImageTransformer2DModel
    return GlmImageTransformer2DModel(patch_size=2, in_channels=4, out_channels=4, num_layers=2, attention_head_dim=8,
                                      num_attention_heads=2, text_embed_dim=text_dim, time_embed_dim=16, condition_dim=8,
                                      prior_vq_quantizer_codebook_size=128)
