"""Normalisations: LayerNorm (DiT) or RMSNorm (Llama); affine-free before AdaLN modulation."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

NORM_KINDS = ("layer", "rms")


class RMSNorm(nn.RMSNorm):
    """``nn.RMSNorm`` whose weight follows the input's dtype: under bf16 autocast the input is bf16,
    and an fp32 weight would send torch to its slow unfused path (one kernel becomes several)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = None if self.weight is None else self.weight.to(x.dtype)
        return F.rms_norm(x, self.normalized_shape, weight, self.eps)


def make_norm(kind: str, dim: int, affine: bool = True, eps: float = 1e-6) -> nn.Module:
    if kind == "layer":
        return nn.LayerNorm(dim, eps=eps, elementwise_affine=affine)
    if kind == "rms":
        return RMSNorm(dim, eps=eps, elementwise_affine=affine)
    raise ValueError(f"norm must be one of {', '.join(NORM_KINDS)}; got {kind!r}")
