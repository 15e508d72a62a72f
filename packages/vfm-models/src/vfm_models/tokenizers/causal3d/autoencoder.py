"""Encoder and decoder of the causal 3D autoencoder (a MAGVIT-2 / Cosmos-style layout, plain torch)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vfm_models.tokenizers.causal3d.layers import CausalConv3d, ChannelNorm, Downsample, ResBlock, Upsample


class Encoder(nn.Module):
    """(B, C, 1 + k*tc, H, W) -> (B, latent, 1 + k, H/sc, W/sc).

    Stage i works at 1/2^i resolution; the first log2(tc) downsamples also halve time.
    ``radius`` is how far (in input pixels) a latent's receptive field reaches from its centre.
    """

    def __init__(self, channels: int, latent: int, base: int, mult: tuple[int, ...], res_blocks: int, t_down: int) -> None:
        super().__init__()
        self.conv_in = CausalConv3d(channels, base * mult[0])
        radius, jump = 1, 1
        self.stages = nn.ModuleList()
        cin = base * mult[0]
        for i, m in enumerate(mult):
            blocks: list[nn.Module] = []
            for _ in range(res_blocks):
                blocks.append(ResBlock(cin, base * m))
                cin = base * m
                radius += 2 * jump
            if i < len(mult) - 1:
                blocks.append(Downsample(cin, temporal=i < t_down))
                radius += jump
                jump *= 2
            self.stages.append(nn.Sequential(*blocks))
        self.mid = ResBlock(cin, cin)
        self.norm_out, self.conv_out = ChannelNorm(cin), CausalConv3d(cin, latent)
        self.radius = radius + 3 * jump

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(x)
        for stage in self.stages:
            h = stage(h)
        return self.conv_out(F.silu(self.norm_out(self.mid(h))))


class Decoder(nn.Module):
    """(B, latent, 1 + k, H', W') -> (B, C, 1 + k*tc, H'*sc, W'*sc), the mirror of :class:`Encoder`.

    ``radius`` bounds (in latents) how far a pixel's receptive field reaches into the latent grid.
    """

    def __init__(self, channels: int, latent: int, base: int, mult: tuple[int, ...], res_blocks: int, t_down: int) -> None:
        super().__init__()
        cin = base * mult[-1]
        self.conv_in = CausalConv3d(latent, cin)
        self.mid = ResBlock(cin, cin)
        radius, jump = 3.0, 1.0
        self.stages = nn.ModuleList()
        for i in reversed(range(len(mult))):
            blocks: list[nn.Module] = []
            for _ in range(res_blocks):
                blocks.append(ResBlock(cin, base * mult[i]))
                cin = base * mult[i]
                radius += 2 * jump
            if i > 0:
                blocks.append(Upsample(cin, temporal=i - 1 < t_down))
                radius += jump  # nearest-neighbour rounding
                jump /= 2
                radius += jump
            self.stages.append(nn.Sequential(*blocks))
        self.norm_out, self.conv_out = ChannelNorm(cin), CausalConv3d(cin, channels)
        self.radius = math.ceil(radius + jump)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.mid(self.conv_in(z))
        for stage in self.stages:
            h = stage(h)
        return self.conv_out(F.silu(self.norm_out(h)))
