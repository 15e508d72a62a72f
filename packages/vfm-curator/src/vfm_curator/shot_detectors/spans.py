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


#: A step between frame times this many times the typical (median) step is a pause in the recording
#: (paused and resumed, a dropped stretch, files joined): the frames either side are not one shot.
PAUSE_STEPS = 10.0


def pause_seconds(times) -> float | None:
    """The step between frame times beyond which the recording paused (see :data:`PAUSE_STEPS`);
    None when there are too few steps to tell."""
    steps = np.diff(np.asarray(times, np.float64))
    forward = steps[steps > 0]
    return PAUSE_STEPS * float(np.median(forward)) if len(forward) >= 2 else None


def pauses(times) -> np.ndarray:
    """Boolean per step ``times[i] -> times[i + 1]``: a pause (see :func:`pause_seconds`)."""
    steps = np.diff(np.asarray(times, np.float64))
    limit = pause_seconds(times)
    return steps > limit if limit is not None else np.zeros(len(steps), bool)


def split_at_pauses(spans: list[tuple[int, int]], times) -> list[tuple[int, int]]:
    """``spans`` cut where the recording pauses: a clip never runs across a gap in time (on the
    constant grid of a variable-rate clip it would be a frozen frame for the whole gap)."""
    cuts = (np.flatnonzero(pauses(times)) + 1).tolist()
    if not cuts:
        return spans
    out = []
    for a, b in spans:
        bounds = [a, *[c for c in cuts if a < c < b], b]
        out += list(zip(bounds[:-1], bounds[1:]))
    return out


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
