"""Colour-space conversion of RGB frames, shared by shot detection and the histogram embedder."""

from __future__ import annotations

import numpy as np

_ZERO, _TWO, _FOUR = np.float32(0.0), np.float32(2.0), np.float32(4.0)


def rgb_to_hsv(frames: np.ndarray) -> np.ndarray:
    """(..., 3) uint8 RGB -> (..., 3) float32 HSV on OpenCV's scales (H/2 in [0, 180), S, V in [0, 255]).

    Channel-wise maxima (not a reduction over the size-3 axis) and one hue quotient per pixel (not
    one per sector, picked afterwards) make it 3x faster on the decode stage's 64x36 frames, where it
    was a fifth of a video's curation time; the figures are the same to the bit."""
    rgb = frames.astype(np.float32) / np.float32(255.0)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    v = np.maximum(np.maximum(r, g), b)
    delta = v - np.minimum(np.minimum(r, g), b)
    # the sector of the hue circle: the maximum's channel (red wins ties, then green)
    is_r = v == r
    is_g = ~is_r & (v == g)
    h = np.where(is_r, g - b, np.where(is_g, b - r, r - g))
    h /= np.maximum(delta, np.float32(1e-12))
    h += np.where(is_r, _ZERO, np.where(is_g, _TWO, _FOUR))
    h *= np.float32(60.0)
    h[h < 0] += np.float32(360.0)  # the red sector's negative side wraps to (300, 360)
    h[delta <= 0] = 0.0  # grey: no hue
    out = np.empty(frames.shape, np.float32)
    out[..., 0] = h * np.float32(0.5)
    out[..., 1] = delta / np.maximum(v, np.float32(1e-12)) * np.float32(255.0)
    out[..., 2] = v * np.float32(255.0)
    return out
