"""The default embedder: colour histogram + coarse layout. Needs no weights. ``embed`` is numpy on
the CPU; ``embed_torch`` is the same maths in torch on the frames' device (the stitch stage's GPU path)."""

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

    def embed_torch(self, frames):
        """:meth:`embed` in torch on ``frames.device``: (N, H, W, 3) uint8 tensor -> (N, dim) float32
        tensor of unit vectors (within float32 summation order of the numpy result)."""
        import torch

        from vfm_curator.shot_detectors.torch_scorer import rgb_to_hsv as rgb_to_hsv_torch

        if frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"expected frames of shape (N, H, W, 3), got {tuple(frames.shape)}")
        n, device = len(frames), frames.device
        bins = torch.tensor(self.bins, dtype=torch.float64, device=device)
        hsv = rgb_to_hsv_torch(frames)  # (N, H, W, 3)
        scale = torch.tensor([180.0, 256.0, 256.0], dtype=torch.float32, device=device)
        # float32 division then a float64 product, as numpy promotes it, so bins match exactly
        idx = torch.minimum(((hsv / scale).double() * bins).long(), (bins - 1).long())
        flat = (idx[..., 0] * self.bins[1] + idx[..., 1]) * self.bins[2] + idx[..., 2]  # (N, H, W)
        size = int(np.prod(self.bins))
        offsets = torch.arange(n, device=device).view(n, 1) * size
        hist = torch.bincount((flat.reshape(n, -1) + offsets).reshape(-1), minlength=n * size)
        hist = _unit(hist.view(n, size).to(torch.float32).sqrt())
        grey = frames.to(torch.float32).mean(dim=-1)  # (N, H, W)
        g = self.grid
        h, w = grey.shape[1] // g * g, grey.shape[2] // g * g
        if h == 0 or w == 0:
            cells = torch.zeros((n, g * g), dtype=torch.float32, device=device)
        else:
            cells = grey[:, :h, :w].reshape(n, g, h // g, g, w // g).mean(dim=(2, 4)).reshape(n, g * g)
            cells = _unit(cells - cells.mean(dim=1, keepdim=True))
        return _unit(torch.cat([hist, self.layout * cells], dim=1))


def _unit(x):
    """Rows scaled to unit length (``vfm_curator.embedders.normalize`` for tensors)."""
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
