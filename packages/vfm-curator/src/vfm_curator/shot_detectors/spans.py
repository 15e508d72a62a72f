"""Turning shot boundaries into clip spans: cuts to spans, a fixed stride, length limits."""

from __future__ import annotations

import numpy as np


def shots_from_cuts(cuts: list[int], num_frames: int) -> list[tuple[int, int]]:
    """Cut positions -> contiguous spans ``[start, end)`` covering ``[0, num_frames)``."""
    bounds = [0, *[c for c in cuts if 0 < c < num_frames], num_frames]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def shots_from_transitions(transition: np.ndarray) -> list[tuple[int, int]]:
    """Per-frame "this frame is a transition" flags -> shots ``[start, end)``, TransNetV2's rule: a
    shot runs up to and including the first flagged frame of a run of flags; the next shot starts at
    the first unflagged frame after the run (so the other frames of a gradual transition belong to
    no shot). A video flagged everywhere is one shot."""
    flags = np.asarray(transition, bool)
    n = len(flags)
    spans: list[tuple[int, int]] = []
    start, prev = 0, False
    for i, flag in enumerate(flags):
        if prev and not flag:
            start = i
        if flag and not prev and i != 0:
            spans.append((start, i + 1))
        prev = bool(flag)
    if n and not flags[-1]:
        spans.append((start, n))
    return spans or ([(0, n)] if n else [])


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


def motion_between(motion: np.ndarray, start: int, end: int) -> float:
    """Mean of the per-frame motion scores inside ``[start, end)`` (the first frame's difference to
    the frame before the span is not part of it), i.e. the mean absolute difference of the span's
    consecutive grey frames; 0 for spans under 2 frames."""
    if end - start < 2:
        return 0.0
    return float(np.asarray(motion[start + 1 : end], np.float64).mean())
