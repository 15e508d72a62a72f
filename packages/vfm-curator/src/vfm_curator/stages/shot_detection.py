"""Shot-boundary detection on downscaled frames, and turning boundaries into clip spans.

The content detector follows PySceneDetect's ``ContentDetector``: the score of frame ``i`` is the
mean absolute change of hue, saturation and value between frames ``i-1`` and ``i`` (OpenCV scales:
H in [0, 180), S and V in [0, 256)), and a cut starts a new shot at ``i`` when the score reaches
``threshold``. Like its ``AdaptiveDetector`` it can also require the score to stand out from the
scores around it (``adaptive_ratio``), which keeps fast camera motion from being read as cuts.
"""

from __future__ import annotations

import numpy as np

from vfm_curator.colour import rgb_to_hsv


def content_scores(frames: np.ndarray) -> np.ndarray:
    """(T, h, w, 3) uint8 RGB -> (T,) float: score[i] = mean |HSV(i) - HSV(i-1)| over pixels and
    channels; score[0] = 0. Hue is compared on its circle (179 and 1 are 2 apart)."""
    if len(frames) < 2:
        return np.zeros(len(frames), np.float32)
    hsv = rgb_to_hsv(frames)
    d = np.abs(np.diff(hsv, axis=0))  # (T-1, h, w, 3)
    d[..., 0] = np.minimum(d[..., 0], 180.0 - d[..., 0])
    per_channel = d.reshape(len(d), -1, 3).mean(axis=1)  # (T-1, 3)
    return np.concatenate([[0.0], per_channel.mean(axis=1)]).astype(np.float32)


def detect_cuts(
    scores: np.ndarray, *, threshold: float = 27.0, min_shot: int = 8, adaptive_ratio: float = 0.0, window: int = 2
) -> list[int]:
    """Frame indices where a new shot starts (never 0), at least ``min_shot`` frames apart.

    ``adaptive_ratio`` > 0 also requires ``score[i] >= adaptive_ratio * mean(score of the`` ``window``
    ``frames each side)``, so a steady high score (fast motion) does not produce cuts.
    """
    cuts: list[int] = []
    last = 0
    for i in range(1, len(scores)):
        if scores[i] < threshold or i - last < min_shot:
            continue
        if adaptive_ratio > 0:
            lo, hi = max(1, i - window), min(len(scores), i + window + 1)
            neighbours = np.concatenate([scores[lo:i], scores[i + 1 : hi]])
            if len(neighbours) and scores[i] < adaptive_ratio * max(float(neighbours.mean()), 1e-6):
                continue
        cuts.append(i)
        last = i
    return cuts


def shots_from_cuts(cuts: list[int], num_frames: int) -> list[tuple[int, int]]:
    """Cut positions -> contiguous spans ``[start, end)`` covering ``[0, num_frames)``."""
    bounds = [0, *[c for c in cuts if 0 < c < num_frames], num_frames]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def fixed_stride(num_frames: int, stride: int) -> list[tuple[int, int]]:
    """Spans of ``stride`` frames (the last one may be shorter)."""
    stride = max(1, stride)
    return [(s, min(s + stride, num_frames)) for s in range(0, num_frames, stride)]


def limit_lengths(spans: list[tuple[int, int]], min_len: int, max_len: int) -> list[tuple[int, int]]:
    """Drop spans shorter than ``min_len``; cut spans longer than ``max_len`` into equal pieces of at
    most ``max_len`` frames (equal pieces, so no short remainder is left behind)."""
    out: list[tuple[int, int]] = []
    for start, end in spans:
        length = end - start
        if length < min_len:
            continue
        pieces = -(-length // max_len) if max_len > 0 else 1
        bounds = [start + round(k * length / pieces) for k in range(pieces + 1)]
        out += [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b - a >= min_len]
    return out
