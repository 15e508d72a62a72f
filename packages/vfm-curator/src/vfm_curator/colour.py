"""Colour-space conversion of RGB frames, shared by shot detection and the histogram embedder."""

from __future__ import annotations

import numpy as np


def rgb_to_hsv(frames: np.ndarray) -> np.ndarray:
    """(..., 3) uint8 RGB -> (..., 3) float32 HSV on OpenCV's scales (H/2 in [0, 180), S, V in [0, 255])."""
    rgb = frames.astype(np.float32) / 255.0
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    v = rgb.max(axis=-1)
    mn = rgb.min(axis=-1)
    delta = v - mn
    s = np.where(v > 0, delta / np.maximum(v, 1e-12), 0.0)
    safe = np.maximum(delta, 1e-12)
    h = np.where(v == r, (g - b) / safe, np.where(v == g, 2.0 + (b - r) / safe, 4.0 + (r - g) / safe))
    h = np.where(delta > 0, (h * 60.0) % 360.0, 0.0)
    return np.stack([h / 2.0, s * 255.0, v * 255.0], axis=-1).astype(np.float32)
