"""Shot-boundary detection on downscaled frames, and turning boundaries into clip spans.

The content detector follows PySceneDetect's ``ContentDetector``: the score of frame ``i`` is the
mean absolute change of hue, saturation and value between frames ``i-1`` and ``i`` (OpenCV scales:
H in [0, 180), S and V in [0, 256)), and a cut starts a new shot at ``i`` when the score reaches
``threshold``. Like its ``AdaptiveDetector`` it can also require the score to stand out from the
scores around it (``adaptive_ratio``), which keeps fast camera motion from being read as cuts.

Scoring is a stream (:class:`FrameScorer`): it holds the previous frame only, so memory does not
grow with a video's length; what a video keeps is one content score and one motion score per frame.
"""

from __future__ import annotations

from array import array

import numpy as np

from vfm_curator.colour import rgb_to_hsv


class FrameScorer:
    """Scores frames one at a time, holding only the previous frame's HSV and grey image.

    ``push(frame)`` takes an (h, w, 3) uint8 RGB frame; afterwards :attr:`content` holds
    :func:`content_scores` of every frame pushed so far and :attr:`motion` the mean absolute
    difference of consecutive grey frames (in [0, 1]; ``motion[i]`` compares ``i-1`` and ``i``,
    ``motion[0] = 0``), both 4 bytes per frame.
    """

    def __init__(self) -> None:
        self._hsv: np.ndarray | None = None
        self._grey: np.ndarray | None = None
        self._content = array("f")
        self._motion = array("f")

    def push(self, frame: np.ndarray) -> None:
        hsv = rgb_to_hsv(frame)  # (h, w, 3) float32
        grey = frame.astype(np.float32).mean(axis=-1)  # (h, w)
        if self._hsv is None or self._hsv.shape != hsv.shape:
            self._content.append(0.0)
            self._motion.append(0.0)
        else:
            self._content.append(_hsv_change(self._hsv, hsv))
            self._motion.append(float(np.abs(grey - self._grey).mean() / 255.0))
        self._hsv, self._grey = hsv, grey

    @property
    def content(self) -> np.ndarray:
        return np.frombuffer(self._content, np.float32).copy()

    @property
    def motion(self) -> np.ndarray:
        return np.frombuffer(self._motion, np.float32).copy()


def _hsv_change(prev: np.ndarray, cur: np.ndarray) -> float:
    """Mean |cur - prev| over pixels and HSV channels, hue compared on its circle."""
    d = np.abs(cur - prev)  # (h, w, 3)
    d[..., 0] = np.minimum(d[..., 0], 180.0 - d[..., 0])
    return float(np.float32(d.reshape(-1, 3).mean(axis=0).mean()))


def content_scores(frames) -> np.ndarray:
    """Frames (a (T, h, w, 3) uint8 RGB array or any iterable of (h, w, 3) frames) -> (T,) float32:
    score[i] = mean |HSV(i) - HSV(i-1)| over pixels and channels; score[0] = 0. Hue is compared on
    its circle (179 and 1 are 2 apart). Streams: one frame at a time."""
    scorer = FrameScorer()
    for frame in frames:
        scorer.push(np.asarray(frame))
    return scorer.content


def motion_between(motion: np.ndarray, start: int, end: int) -> float:
    """Mean of the per-frame motion scores inside ``[start, end)`` (the first frame's difference to
    the frame before the span is not part of it), i.e. the mean absolute difference of the span's
    consecutive grey frames; 0 for spans under 2 frames."""
    if end - start < 2:
        return 0.0
    return float(np.asarray(motion[start + 1 : end], np.float64).mean())


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
