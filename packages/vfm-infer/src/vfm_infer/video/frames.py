"""Decoder output (C, T, H, W) in [-1, 1] to uint8 RGB frames (T, H, W, 3)."""

from __future__ import annotations

import numpy as np
import torch


def to_uint8_frames(video: torch.Tensor) -> np.ndarray:
    """(C, T, H, W) float in [-1, 1] -> (T, H, W, 3) uint8; one channel is repeated to grey RGB."""
    if video.dim() != 4:
        raise ValueError(f"expected a video (C, T, H, W), got shape {tuple(video.shape)}")
    c = video.shape[0]
    if c == 1:
        video = video.expand(3, *video.shape[1:])
    elif c != 3:
        raise ValueError(f"can write 1- or 3-channel videos, got {c} channels")
    pixels = ((video.detach().float().cpu().clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)
    return pixels.permute(1, 2, 3, 0).contiguous().numpy()
