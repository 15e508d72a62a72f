"""Normalisations: LayerNorm (DiT) or RMSNorm (Llama); affine-free before AdaLN modulation."""

from __future__ import annotations

from torch import nn

NORM_KINDS = ("layer", "rms")


def make_norm(kind: str, dim: int, affine: bool = True, eps: float = 1e-6) -> nn.Module:
    if kind == "layer":
        return nn.LayerNorm(dim, eps=eps, elementwise_affine=affine)
    if kind == "rms":
        return nn.RMSNorm(dim, eps=eps, elementwise_affine=affine)
    raise ValueError(f"norm must be one of {', '.join(NORM_KINDS)}; got {kind!r}")
