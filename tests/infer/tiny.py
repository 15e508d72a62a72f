"""Tiny real models and inference exports for the tests (pixel tokenizer, a 2-block DiT)."""

from __future__ import annotations

import torch

import vfm_models

#: (C, T, H, W) latents of the pixel tokenizer at patch 2: 12 channels, 4 frames of 8x8 -> 16x16 pixels.
LATENT_SHAPE = (12, 4, 8, 8)


def tiny_dit(seed: int = 0, **overrides):
    torch.manual_seed(seed)
    options = dict(in_channels=12, patch=(1, 2, 2), hidden=32, depth=2, num_heads=2, num_classes=4)
    options.update(overrides)
    model = vfm_models.get_family("dit").create(**options)
    # adaLN-Zero starts at zero output; give the blocks and head weights so outputs depend on them.
    with torch.no_grad():
        for p in model.parameters():
            if p.abs().sum() == 0:
                p.normal_(0, 0.05)
    return model.eval()


def tiny_meta(formulation: str = "edm", **extra) -> dict:
    meta = {
        "family": "dit",
        "formulation": formulation,
        "formulation_options": vfm_models.get_formulation(formulation)().options(),
        "tokenizer": "pixel",
        "tokenizer_options": {"patch": 2},
        "text_encoder": None,
        "text_encoder_options": {},
        "latent_shape": list(LATENT_SHAPE),
    }
    meta.update(extra)
    return meta
