"""Colour-change shot detection on the HSV content score: PySceneDetect's ``ContentDetector`` rule
(``content``) and its ``AdaptiveDetector`` rule (``adaptive``), both written here on our score.

The content score of frame ``i`` is the mean absolute change of hue, saturation and value between
frames ``i-1`` and ``i`` (OpenCV scales: H in [0, 180), S and V in [0, 256); hue compared on its
circle); ``score[0] = 0``. The decode stage computes it as a stream (:class:`FrameScorer` holds a
batch of small frames and the previous frame's HSV), so these detectors never see a frame.

- ``content``: a new shot starts at ``i`` when ``score[i] >= threshold`` (and, with
  ``adaptive_ratio`` > 0, when it is that many times the mean of the two scores each side).
- ``adaptive``: ``ratio[i] = score[i] / mean(score of the window_width frames before and after i)``
  (255 when that mean is 0 and the score reaches ``min_content_val``; capped at 255); a new shot
  starts at ``i`` when ``ratio[i] >= adaptive_threshold`` and ``score[i] >= min_content_val``. A
  steady high score (fast camera motion) has a ratio near 1, so it does not cut.

Both keep cuts at least ``min_shot_s`` apart.
"""

from __future__ import annotations

from array import array

import numpy as np

from vfm_curator.colour import HSVScratch, rgb_to_hsv
from vfm_curator.shot_detectors.base import ShotDetector
from vfm_curator.shot_detectors.spans import shots_from_cuts


#: a :class:`FrameScorer` batch holds at most this many pixels (its arrays take ~75 bytes a pixel:
#: ~10 MB), and one frame whatever its size
BATCH_PIXELS = 2**17


class FrameScorer:
    """Scores frames as a stream, holding at most one batch of frames and the last frame's HSV and
    grey image.

    ``push(frame)`` takes an (h, w, 3) uint8 RGB frame; whenever read, :attr:`content` holds
    :func:`content_scores` of every frame pushed so far and :attr:`motion` the mean absolute
    difference of consecutive grey frames (in [0, 1]; ``motion[i]`` compares ``i-1`` and ``i``,
    ``motion[0] = 0``), both 4 bytes per frame. A frame of another size than the one before it
    scores 0 in both, as the first frame does.

    Pushed frames are copied into a buffer of up to ``batch`` frames (and :data:`BATCH_PIXELS`
    pixels) and scored together, in one numpy pass over arrays allocated once per frame size, when
    it is full or the scores are read: at the decode stage's 64x36, numpy's per-call overhead was
    most of the cost of scoring frames one by one. The scores are those of the frames scored one by
    one, to the bit (the same operations, each frame's means reduced as a contiguous row).
    """

    def __init__(self, batch: int = 32) -> None:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"FrameScorer: batch must be a positive whole number of frames, got {batch!r}")
        self.batch = batch
        self._work: _Batch | None = None  # the buffers for the current frame size
        self._pending = 0  # frames in the batch, not scored yet
        self._has_prev = False  # whether the batch's slot 0 holds the frame before it
        self._content = array("f")
        self._motion = array("f")

    def push(self, frame: np.ndarray) -> None:
        frame = np.asarray(frame)
        if frame.ndim != 3 or frame.shape[-1] != 3 or frame.dtype != np.uint8:
            raise ValueError(f"FrameScorer: expected an (h, w, 3) uint8 RGB frame, got shape {frame.shape} {frame.dtype}")
        work = self._work
        if work is None or work.frames.shape[1:] != frame.shape:
            self._score_pending()
            n = max(1, min(self.batch, BATCH_PIXELS // max(1, frame.shape[0] * frame.shape[1])))
            work = self._work = _Batch(n, frame.shape)
            self._has_prev = False
        work.frames[self._pending] = frame
        self._pending += 1
        if self._pending == len(work.frames):
            self._score_pending()

    def _score_pending(self) -> None:
        k, self._pending = self._pending, 0
        if not k:
            return
        w = self._work
        # slot 0 of hsv and grey: the frame before the batch (if any); slots 1..k: the batch
        rgb_to_hsv(w.frames[:k], w.hsv[1 : k + 1], scratch=w.scratch)
        grey_of(w.frames[:k], out=w.grey[1 : k + 1], scratch=w.sum16)
        if not self._has_prev:  # the first frame, or the first of another size
            self._content.append(0.0)
            self._motion.append(0.0)
        first = 0 if self._has_prev else 1  # the first frame of the batch that has one before it
        if k > first:
            d = np.subtract(w.hsv[first + 1 : k + 1], w.hsv[first:k], out=w.hsv_diff[first:k])  # (k', h, w, 3)
            np.abs(d, out=d)
            hue, other_way = d[..., 0], w.hue[first:k]
            np.subtract(np.float32(180.0), hue, out=other_way)
            np.minimum(hue, other_way, out=hue)  # hue compared on its circle
            self._content.frombytes(_row_means(d).tobytes())
            g = np.subtract(w.grey[first + 1 : k + 1], w.grey[first:k], out=w.grey_diff[first:k])
            np.abs(g, out=g)
            self._motion.frombytes((_row_means(g) / np.float32(255.0)).tobytes())
        w.hsv[0], w.grey[0] = w.hsv[k], w.grey[k]
        self._has_prev = True

    @property
    def content(self) -> np.ndarray:
        self._score_pending()
        return np.frombuffer(self._content, np.float32).copy()

    @property
    def motion(self) -> np.ndarray:
        self._score_pending()
        return np.frombuffer(self._motion, np.float32).copy()


class _Batch:
    """A :class:`FrameScorer`'s arrays for ``n`` frames of one ``(h, w, 3)`` shape, made once: fresh
    arrays of a few hundred KB a batch cost page faults (glibc maps them anew each time), which took
    ~40 % of the scoring time."""

    def __init__(self, n: int, shape: tuple[int, int, int]) -> None:
        h, w, _ = shape
        self.frames = np.empty((n, h, w, 3), np.uint8)
        self.hsv = np.empty((n + 1, h, w, 3), np.float32)
        self.grey = np.empty((n + 1, h, w), np.float32)
        self.hsv_diff = np.empty((n, h, w, 3), np.float32)
        self.grey_diff, self.hue = np.empty((n, h, w), np.float32), np.empty((n, h, w), np.float32)
        self.sum16 = np.empty((n, h, w), np.uint16)
        self.scratch = HSVScratch((n, h, w))


def grey_of(frame: np.ndarray, out: np.ndarray | None = None, *, scratch: np.ndarray | None = None) -> np.ndarray:
    """(..., 3) uint8 RGB -> (...) float32 mean of the channels (the channel sum is exact in
    integers: the same figures as a float mean over the size-3 axis, 5x faster). ``out`` (float32)
    and ``scratch`` (uint16, at least as many leading frames), both of the frame's leading shape,
    spare the allocations."""
    lead = frame.shape[:-1]
    total = np.empty(lead, np.uint16) if scratch is None else scratch[: lead[0]] if lead else scratch
    np.add(frame[..., 0], frame[..., 1], out=total, dtype=np.uint16)
    total += frame[..., 2]
    if out is None:
        out = np.empty(lead, np.float32)
    return np.divide(total, np.float32(3.0), out=out, dtype=np.float32)


def _row_means(x: np.ndarray) -> np.ndarray:
    """(n, ...) float32 -> (n,) float32 mean of each frame: a contiguous row each, summed pairwise as
    ``x[i].mean()`` sums it (the figures of one frame at a time)."""
    return x.reshape(len(x), -1).mean(axis=1, dtype=np.float32)


def content_scores(frames) -> np.ndarray:
    """Frames (a (T, h, w, 3) uint8 RGB array or any iterable of (h, w, 3) frames) -> (T,) float32:
    score[i] = mean |HSV(i) - HSV(i-1)| over pixels and channels; score[0] = 0. Hue is compared on
    its circle (179 and 1 are 2 apart). Streams: a batch of frames at a time (:class:`FrameScorer`)."""
    scorer = FrameScorer()
    for frame in frames:
        scorer.push(np.asarray(frame))
    return scorer.content


def detect_cuts(
    scores: np.ndarray, *, threshold: float = 27.0, min_shot: int = 8, adaptive_ratio: float = 0.0, window: int = 2
) -> list[int]:
    """The ``content`` rule: frame indices where a new shot starts (never 0), at least ``min_shot``
    frames apart.

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


def adaptive_ratios(scores: np.ndarray, *, window_width: int = 2, min_content_val: float = 15.0) -> np.ndarray:
    """(T,) ``ratio[i] = score[i] / mean(score[i-w:i] and score[i+1:i+w+1])``, capped at 255; 255 where
    that mean is 0 (below 1e-5) and ``score[i] >= min_content_val``, else 0 there. Frames without
    ``w`` frames on both sides get 0 (they cannot be judged, so never cut)."""
    s = np.asarray(scores, np.float64)
    w, n = int(window_width), len(s)
    ratios = np.zeros(n, np.float64)
    if n < 2 * w + 1:
        return ratios
    csum = np.concatenate([[0.0], np.cumsum(s)])
    centre = np.arange(w, n - w)
    mean = (csum[centre + w + 1] - csum[centre - w] - s[centre]) / (2 * w)  # the 2w neighbours
    target = s[centre]
    flat = mean < 1e-5
    ratio = np.where(flat, np.where(target >= min_content_val, 255.0, 0.0),
                     np.minimum(target / np.where(flat, 1.0, mean), 255.0))
    ratios[centre] = ratio
    return ratios


def adaptive_cuts(scores: np.ndarray, *, adaptive_threshold: float = 3.0, min_content_val: float = 15.0,
                  window_width: int = 2, min_shot: int = 15) -> list[int]:
    """The ``adaptive`` rule: frames whose :func:`adaptive_ratios` reaches ``adaptive_threshold`` and
    whose score reaches ``min_content_val``. A frame is judged once the ``window_width`` frames after
    it are in, so the spacing is measured as PySceneDetect measures it: from the last cut to the
    newest frame seen (``i + window_width``), at least ``min_shot`` frames."""
    s = np.asarray(scores, np.float64)
    ratios = adaptive_ratios(s, window_width=window_width, min_content_val=min_content_val)
    cuts: list[int] = []
    last = 0
    for i in np.flatnonzero((ratios >= adaptive_threshold) & (s >= min_content_val)):
        if i + window_width - last >= min_shot:
            cuts.append(int(i))
            last = int(i)
    return cuts


def _frames(seconds: float, fps: float) -> int:
    return max(1, round(float(seconds) * fps)) if fps > 0 else 1


class ContentDetector(ShotDetector):
    """``content``: a cut where the HSV content score reaches ``threshold`` (PySceneDetect's
    ContentDetector rule; ``adaptive_ratio`` > 0 adds a local-contrast check)."""

    name = "content"
    defaults = {"threshold": 27.0, "min_shot_s": 0.25, "adaptive_ratio": 0.0}

    def check_options(self) -> None:
        self.number("threshold", lo=0)
        self.number("min_shot_s", lo=0)
        self.number("adaptive_ratio", lo=0)

    def spans(self, scores: np.ndarray, *, fps: float) -> list[tuple[int, int]]:
        cuts = detect_cuts(scores, threshold=float(self.opt["threshold"]), min_shot=_frames(self.opt["min_shot_s"], fps),
                           adaptive_ratio=float(self.opt["adaptive_ratio"]))
        return shots_from_cuts(cuts, len(scores))


class AdaptiveDetector(ShotDetector):
    """``adaptive``: a cut where the content score stands out from a rolling average of its
    neighbours (PySceneDetect's AdaptiveDetector rule): fewer false cuts on fast camera motion."""

    name = "adaptive"
    defaults = {"adaptive_threshold": 3.0, "min_content_val": 15.0, "window_width": 2, "min_shot_s": 0.25}

    def check_options(self) -> None:
        self.number("adaptive_threshold", lo=0, lo_open=True)
        self.number("min_content_val", lo=0)
        self.number("window_width", lo=1, integer=True)
        self.number("min_shot_s", lo=0)

    def spans(self, scores: np.ndarray, *, fps: float) -> list[tuple[int, int]]:
        cuts = adaptive_cuts(scores, adaptive_threshold=float(self.opt["adaptive_threshold"]),
                             min_content_val=float(self.opt["min_content_val"]),
                             window_width=int(self.opt["window_width"]), min_shot=_frames(self.opt["min_shot_s"], fps))
        return shots_from_cuts(cuts, len(scores))
