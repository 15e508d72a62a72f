"""Conditioning embedders: noise level (timestep) and class label -> (B, D) vectors (DiT paper)."""

from __future__ import annotations

import math

import torch
from torch import nn


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0, freq_shift: int = 0) -> torch.Tensor:
    """Sinusoidal features [cos | sin] of a (B,) float tensor -> (B, dim) (GLIDE / DiT).

    Frequency i is ``max_period ** (-i / (dim/2 - freq_shift))``: DiT uses ``freq_shift=0``;
    diffusers' DiT (``Timesteps(downscale_freq_shift=1)``) uses 1.
    """
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / (half - freq_shift))
    args = t.float()[:, None] * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
    return emb


class TimestepEmbedder(nn.Module):
    """t (B,) -> sinusoidal features -> MLP -> (B, D)."""

    def __init__(self, hidden: int, frequency_dim: int = 256, freq_shift: int = 0) -> None:
        super().__init__()
        self.frequency_dim = frequency_dim
        self.freq_shift = freq_shift
        self.mlp = nn.Sequential(nn.Linear(frequency_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        for layer in (self.mlp[0], self.mlp[2]):
            nn.init.normal_(layer.weight, std=0.02)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        if t.dim() != 1:
            raise ValueError(f"t must be (B,) noise levels, got shape {tuple(t.shape)}")
        features = timestep_embedding(t, self.frequency_dim, freq_shift=self.freq_shift)
        return self.mlp(features.to(self.mlp[0].weight.dtype))


class LabelEmbedder(nn.Module):
    """y (B,) long -> (B, D); label ``num_classes`` is the null class used for classifier-free guidance."""

    def __init__(self, num_classes: int, hidden: int) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.table = nn.Embedding(num_classes + 1, hidden)
        nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        if y.dtype not in (torch.int32, torch.int64) or y.dim() != 1:
            raise ValueError(f"class labels must be a (B,) integer tensor, got {y.dtype} {tuple(y.shape)}")
        return self.table(y)
