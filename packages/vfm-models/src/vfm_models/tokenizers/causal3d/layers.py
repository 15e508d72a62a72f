"""Layers of the causal 3D autoencoder.

Every layer is causal in time (an output frame sees only input frames at or before it) and local in
space (no statistics over the frame), so encoding in temporal chunks is exact and spatial tiles
agree with the whole frame wherever a tile's halo covers the receptive field.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class CausalConv3d(nn.Module):
    """A Conv3d padded on the left in time only (replicating the first frame) and symmetrically in space.

    With kernel kt and stride st an input of 1 + k*st frames gives 1 + k frames: output j sees input
    frames up to j*st, so the first frame is encoded alone. In streaming mode (``start_stream``)
    the frames the next output still needs are kept, so a video fed in chunks gives exactly the
    same result as the whole video.
    """

    def __init__(self, cin: int, cout: int, kernel=(3, 3, 3), stride=(1, 1, 1)) -> None:
        super().__init__()
        self.kt, ks = kernel[0], kernel[1]
        self.st = stride[0]
        self.conv = nn.Conv3d(cin, cout, kernel, stride=stride, padding=(0, ks // 2, ks // 2))
        self.streaming = False
        self.cache: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, T, H, W)
        if self.streaming and self.cache is not None:
            x = torch.cat([self.cache, x], 2)
        elif self.kt > 1:
            x = torch.cat([x[:, :, :1].expand(-1, -1, self.kt - 1, -1, -1), x], 2)
        out = self.conv(x)
        if self.streaming:
            self.cache = x[:, :, out.shape[2] * self.st :]  # the frames the next output starts from
        return out


class ChannelNorm(nn.Module):
    """LayerNorm over channels at each (t, h, w): local, so it keeps causality and tiling exact."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.movedim(1, -1)).movedim(-1, 1)


class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.norm1, self.conv1 = ChannelNorm(cin), CausalConv3d(cin, cout)
        self.norm2, self.conv2 = ChannelNorm(cout), CausalConv3d(cout, cout)
        self.skip = nn.Conv3d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


class Downsample(nn.Module):
    """Halve H and W; halve time too (1 + 2k -> 1 + k frames) when ``temporal``."""

    def __init__(self, channels: int, temporal: bool) -> None:
        super().__init__()
        st = 2 if temporal else 1
        self.conv = CausalConv3d(channels, channels, (3, 3, 3), stride=(st, 2, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class Upsample(nn.Module):
    """Double H and W; in time 1 + k -> 1 + 2k frames when ``temporal`` (the first frame stays single)."""

    def __init__(self, channels: int, temporal: bool) -> None:
        super().__init__()
        self.temporal = temporal
        self.conv = CausalConv3d(channels, channels)
        self.streaming = False
        self.started = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.repeat_interleave(2, dim=3).repeat_interleave(2, dim=4)
        if self.temporal:
            x = x.repeat_interleave(2, dim=2)
            if not (self.streaming and self.started):
                x = x[:, :, 1:]  # the first latent frame stands for one frame, the others for two
            self.started = self.streaming
        return self.conv(x)


def set_streaming(module: nn.Module, on: bool) -> None:
    """Switch streaming on or off for every causal layer in ``module``, dropping any kept frames."""
    for m in module.modules():
        if isinstance(m, (CausalConv3d, Upsample)):
            m.streaming = on
            if isinstance(m, CausalConv3d):
                m.cache = None
            else:
                m.started = False
