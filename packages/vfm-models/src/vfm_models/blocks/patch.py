"""3D patch embedding of latents (B, C, T, H, W) -> tokens (B, T'*H'*W', D), t-major, and its inverse."""

from __future__ import annotations

from typing import Sequence, Tuple

import torch
from torch import nn

Patch = Tuple[int, int, int]


def _grid(shape: Sequence[int], patch: Patch) -> Tuple[int, int, int]:
    T, H, W = shape
    pt, ph, pw = patch
    if T % pt or H % ph or W % pw:
        raise ValueError(f"latent size (T, H, W) = {(T, H, W)} is not divisible by the patch {tuple(patch)}")
    return T // pt, H // ph, W // pw


def patchify(x: torch.Tensor, patch: Patch) -> Tuple[torch.Tensor, Tuple[int, int, int]]:
    """(B, C, T, H, W) -> (B, T'*H'*W', pt*ph*pw*C) and the grid (T', H', W')."""
    if x.dim() != 5:
        raise ValueError(f"latents must be (B, C, T, H, W), got shape {tuple(x.shape)}")
    B, C = x.shape[:2]
    Tp, Hp, Wp = _grid(x.shape[2:], patch)
    pt, ph, pw = patch
    x = x.reshape(B, C, Tp, pt, Hp, ph, Wp, pw)
    x = x.permute(0, 2, 4, 6, 3, 5, 7, 1)  # (B, T', H', W', pt, ph, pw, C)
    return x.reshape(B, Tp * Hp * Wp, pt * ph * pw * C), (Tp, Hp, Wp)


def unpatchify(tokens: torch.Tensor, grid: Sequence[int], patch: Patch, channels: int) -> torch.Tensor:
    """(B, T'*H'*W', pt*ph*pw*C) -> (B, C, T, H, W): the exact inverse of :func:`patchify`."""
    B = tokens.shape[0]
    Tp, Hp, Wp = grid
    pt, ph, pw = patch
    x = tokens.reshape(B, Tp, Hp, Wp, pt, ph, pw, channels)
    x = x.permute(0, 7, 1, 4, 2, 5, 3, 6)  # (B, C, T', pt, H', ph, W', pw)
    return x.reshape(B, channels, Tp * pt, Hp * ph, Wp * pw)


class PatchEmbed3D(nn.Module):
    """Non-overlapping (pt, ph, pw) patches -> D: a Linear over each flattened patch (= Conv3d, stride=kernel)."""

    def __init__(self, in_channels: int, hidden: int, patch: Patch) -> None:
        super().__init__()
        self.patch = tuple(patch)
        self.in_channels = in_channels
        self.proj = nn.Linear(in_channels * patch[0] * patch[1] * patch[2], hidden)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, Tuple[int, int, int]]:
        if x.shape[1] != self.in_channels:
            raise ValueError(f"latents have {x.shape[1]} channels; this model takes {self.in_channels}")
        patches, grid = patchify(x, self.patch)
        # float32 latents (a sampler's) into a bf16 model: computed in the weights' dtype, as the noise level is
        return self.proj(patches.to(self.proj.weight.dtype)), grid  # (B, S, D)
