"""Tiny models and matching inputs of every built-in family, shared by the model tests."""

from __future__ import annotations

import torch

import vfm_models

FAMILIES = ("dit", "dit-cross", "moviegen", "stdit", "wan")


def tiny(family: str, **overrides):
    torch.manual_seed(0)
    return vfm_models.get_family(family).create("tiny", **overrides)


def cond_for(model, batch: int, text_len: int = 5, generator=None) -> dict:
    """Conditioning of the right kind for ``model``; the second caption is padded (shorter)."""
    cfg = model.config
    cond = {}
    if cfg.num_classes:
        cond["y"] = torch.arange(batch) % cfg.num_classes
    if cfg.text_dim:
        cond["text"] = torch.randn(batch, text_len, cfg.text_dim, generator=generator)
        mask = torch.ones(batch, text_len, dtype=torch.bool)
        mask[1::2, text_len - 2 :] = False
        cond["text_mask"] = mask
    return cond


def unmodulated(model, seed: int = 1):
    """Give the zero-initialised AdaLN/final layers random weights so every path carries signal."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "adaln" in name or "final_layer.linear" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    return model
