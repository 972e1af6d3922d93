"""The inputs every pipeline call gets, chosen from its `__call__` signature, and its output as an array.

Same inputs on both sides: a prompt, two denoising steps, a seeded CPU generator (Diffusers draws the noise
on CPU for another device and moves it, so CPU and neuron start from the same latents), a small seeded
image and mask where the pipeline takes them, and numpy output.
"""

from __future__ import annotations

import inspect

import numpy as np

PROMPT = "a photo of a cat"
STEPS = 2
SEED = 0

# image-like inputs, by parameter name: "rgb" an image, "mask" a black/white mask, "frames" a video (PIL frames)
VIDEO_FRAMES = 9
_IMAGE_PARAMS = {"image": "rgb", "video": "frames", "control_image": "rgb", "mask_image": "mask", "init_image": "rgb",
                 "depth_map": "mask", "reference_image": "rgb",
                 "control_mask": "mask", "original_image": "rgb",
                 "example_image": "rgb"}


def _image(kind: str, size: int):
    from PIL import Image
    rng = np.random.default_rng(SEED)
    if kind == "frames":
        return [Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8), mode="RGB")
                for _ in range(VIDEO_FRAMES)]
    if kind == "mask":
        mask = np.zeros((size, size), dtype=np.uint8)
        mask[size // 4: 3 * size // 4, size // 4: 3 * size // 4] = 255
        return Image.fromarray(mask, mode="L")
    return Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8), mode="RGB")


def call_kwargs(method, size: int, extra: dict) -> dict:
    """Keyword arguments for one call of the pipeline's `method` (its __call__, or the method a recipe names), a
    new generator each time: the same noise each call."""
    import torch
    params = inspect.signature(method).parameters
    kw: dict = {}
    if "prompt" in params:
        kw["prompt"] = PROMPT
    if "num_inference_steps" in params:
        kw["num_inference_steps"] = STEPS
    for name in ("height", "width"):
        if name in params:
            kw[name] = size
    if "output_type" in params:
        kw["output_type"] = "np"
    if "generator" in params:
        kw["generator"] = torch.Generator("cpu").manual_seed(SEED)
    for name, kind in _IMAGE_PARAMS.items():
        if name in params and params[name].default in (None, inspect.Parameter.empty):
            kw[name] = _image(kind, size)
    kw.update({k: v() if callable(v) else v for k, v in extra.items()})  # a callable: a fresh tensor per call
    return kw


def as_array(output) -> np.ndarray:
    """The pipeline's result (images, frames, audio, latents) as one float array."""
    import torch
    first = output[0] if not isinstance(output, (np.ndarray, torch.Tensor)) else output
    return _to_numpy(first)


def _to_numpy(x) -> np.ndarray:
    import torch
    if isinstance(x, torch.Tensor):
        return x.detach().float().cpu().numpy()
    if isinstance(x, np.ndarray):
        return x.astype(np.float32)
    if isinstance(x, (list, tuple)):
        return np.stack([_to_numpy(e) for e in x])
    return np.asarray(x, dtype=np.float32)  # a PIL image
