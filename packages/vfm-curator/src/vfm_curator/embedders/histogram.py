"""The default CPU embedder: colour histogram + coarse layout. Needs no weights."""

from __future__ import annotations

import numpy as np

from vfm_curator.colour import rgb_to_hsv
from vfm_curator.embedders import normalize


class HistogramEmbedder:
    """A joint HSV histogram (8 x 4 x 4 bins, square-rooted so cosine similarity is the
    Bhattacharyya coefficient) concatenated with a zero-mean 4 x 4 grey layout, weighted ``layout``.

    Frames of the same shot score close to 1; frames of different shots score far lower. It is a
    cheap stand-in for a learned embedder, good for stitching and de-duplication, not for search.
    """

    def __init__(self, bins: tuple[int, int, int] = (8, 4, 4), grid: int = 4, layout: float = 0.5) -> None:
        self.bins, self.grid, self.layout = tuple(bins), int(grid), float(layout)
        self.dim = int(np.prod(self.bins)) + self.grid * self.grid

    def embed(self, frames: np.ndarray) -> np.ndarray:
        frames = np.asarray(frames)
        if frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"expected frames of shape (N, H, W, 3), got {frames.shape}")
        hsv = rgb_to_hsv(frames)  # (N, H, W, 3)
        scale = np.array([180.0, 256.0, 256.0], np.float32)
        idx = np.minimum((hsv / scale * np.array(self.bins)).astype(np.int64), np.array(self.bins) - 1)
        flat = (idx[..., 0] * self.bins[1] + idx[..., 1]) * self.bins[2] + idx[..., 2]  # (N, H, W)
        n = len(frames)
        hist = np.zeros((n, int(np.prod(self.bins))), np.float32)
        for i in range(n):
            hist[i] = np.bincount(flat[i].ravel(), minlength=hist.shape[1])
        hist = normalize(np.sqrt(hist))
        grey = frames.astype(np.float32).mean(axis=-1)  # (N, H, W)
        g = self.grid
        h, w = grey.shape[1] // g * g, grey.shape[2] // g * g
        if h == 0 or w == 0:
            cells = np.zeros((n, g * g), np.float32)
        else:
            cells = grey[:, :h, :w].reshape(n, g, h // g, g, w // g).mean(axis=(2, 4)).reshape(n, g * g)
            cells = normalize(cells - cells.mean(axis=1, keepdims=True))
        return normalize(np.concatenate([hist, self.layout * cells], axis=1))
