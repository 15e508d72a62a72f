"""Which frame shows a clip best: the one with the most detail, not a fade's blank frame."""

from __future__ import annotations

import numpy as np


def detail(frame: np.ndarray) -> float:
    """Contrast plus edges of an (H, W, 3) uint8 frame: grey standard deviation + mean absolute
    horizontal and vertical gradient. A plain (white, black) frame scores 0."""
    grey = frame.astype(np.float32).mean(axis=-1)
    edges = np.abs(np.diff(grey, axis=0)).mean() if grey.shape[0] > 1 else 0.0
    edges += np.abs(np.diff(grey, axis=1)).mean() if grey.shape[1] > 1 else 0.0
    return float(grey.std() + edges)


def representative_frame(frames: list[np.ndarray]) -> np.ndarray:
    """The candidate with the highest :func:`detail` (the earliest among equals)."""
    if not frames:
        raise ValueError("no frame to choose a thumbnail from")
    scores = [detail(f) for f in frames]
    return frames[int(np.argmax(scores))]
