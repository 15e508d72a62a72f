"""The identity/patch tokenizer: exact, weightless, for tiny CPU runs and exactness tests."""

from __future__ import annotations

import torch

from vfm_models.tokenizers._shapes import check_pixels
from vfm_models.options import named_options


@named_options("tokenizer")
class PixelTokenizer:
    """Folds ``patch`` x ``patch`` pixel squares into channels (space-to-depth); decode is exact.

    ``patch=1`` is the identity. Frames are not compressed, so every frame count is accepted.
    """

    temporal_compression = 1

    def __init__(self, patch: int = 1, channels: int = 3) -> None:
        if patch < 1:
            raise ValueError(f"patch must be >= 1, got {patch}")
        self.patch = patch
        self.channels = channels
        self.spatial_compression = patch
        self.latent_channels = channels * patch * patch

    @staticmethod
    def declared_latent_channels(options) -> int:
        """The latent channels of these options (defaults filled in), unbuilt: an export is checked when written."""
        return int(options["channels"]) * int(options["patch"]) ** 2

    def latent_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Latent (C', T, H/p, W/p) for a pixel shape (C, T, H, W); a leading batch dim is kept."""
        *batch, c, t, h, w = shape
        self._check(c, h, w)
        p = self.patch
        return (*batch, c * p * p, t, h // p, w // p)

    def _check(self, c: int, h: int, w: int) -> None:
        if c != self.channels:
            raise ValueError(f"pixel tokenizer expects {self.channels} channels, got {c}")
        if h % self.patch or w % self.patch:
            raise ValueError(
                f"pixel tokenizer with patch {self.patch} accepts heights and widths divisible by "
                f"{self.patch}; got {h}x{w}"
            )

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        """(B, C, T, H, W) -> (B, C*p*p, T, H/p, W/p)."""
        if video.dim() != 5:
            raise ValueError(f"pixel tokenizer encodes a batch of videos (B, C, T, H, W); got shape {tuple(video.shape)}")
        b, c, t, h, w = video.shape
        self._check(c, h, w)
        check_pixels("pixel tokenizer", video)
        p = self.patch
        x = video.reshape(b, c, t, h // p, p, w // p, p)
        return x.permute(0, 1, 4, 6, 2, 3, 5).reshape(b, c * p * p, t, h // p, w // p)

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """(B, C*p*p, T, H', W') -> (B, C, T, H'*p, W'*p), exactly the video ``encode`` was given."""
        if latent.dim() != 5 or latent.shape[1] != self.latent_channels:
            raise ValueError(f"pixel tokenizer decodes latents (B, {self.latent_channels}, T, H', W'); "
                             f"got shape {tuple(latent.shape)}")
        b, cpp, t, hp, wp = latent.shape
        p = self.patch
        c = cpp // (p * p)
        x = latent.reshape(b, c, p, p, t, hp, wp)
        return x.permute(0, 1, 4, 5, 2, 6, 3).reshape(b, c, t, hp * p, wp * p)
