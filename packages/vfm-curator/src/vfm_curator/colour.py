"""Colour-space conversion of RGB frames, shared by shot detection and the histogram embedder."""

from __future__ import annotations

import numpy as np

_ZERO, _TWO, _FOUR = np.float32(0.0), np.float32(2.0), np.float32(4.0)
_TINY, _60, _255, _360 = np.float32(1e-12), np.float32(60.0), np.float32(255.0), np.float32(360.0)


class HSVScratch:
    """Work arrays for :func:`rgb_to_hsv` of frames of shape ``(*lead, 3)`` or any prefix of it along
    the first axis (``lead[0]`` is a batch's capacity): a caller converting batch after batch reuses
    them instead of allocating a dozen arrays a call, which at a few hundred KB each glibc may hand
    out as fresh pages every time (page faults took ~40 % of the scoring time of 16-64 frame
    batches at 64x36)."""

    def __init__(self, lead: tuple[int, ...]) -> None:
        self.lead = tuple(int(n) for n in lead)
        self.rgb = np.empty((*self.lead, 3), np.float32)
        self.v, self.delta, self.h, self.tmp = (np.empty(self.lead, np.float32) for _ in range(4))
        self.is_r, self.is_g, self.mask = (np.empty(self.lead, np.bool_) for _ in range(3))

    def arrays(self, lead: tuple[int, ...]) -> tuple[np.ndarray, ...]:
        """``(rgb, v, delta, h, tmp, is_r, is_g, mask)`` cut to the first ``lead[0]`` frames (the
        other sizes must be this scratch's)."""
        whole = (self.rgb, self.v, self.delta, self.h, self.tmp, self.is_r, self.is_g, self.mask)
        if tuple(lead) == self.lead:
            return whole
        if len(lead) != len(self.lead) or lead[1:] != self.lead[1:] or not 0 <= lead[0] <= self.lead[0]:
            raise ValueError(f"HSVScratch for {self.lead} cannot hold frames of leading shape {lead}")
        return tuple(a[: lead[0]] for a in whole)


def rgb_to_hsv(frames: np.ndarray, out: np.ndarray | None = None, *, scratch: HSVScratch | None = None) -> np.ndarray:
    """(..., 3) uint8 RGB -> (..., 3) float32 HSV on OpenCV's scales (H/2 in [0, 180), S, V in [0, 255]).

    ``out`` (a float32 array of ``frames``' shape) receives the result; ``scratch``
    (:class:`HSVScratch`) holds the work arrays, for callers converting batch after batch.

    Channel-wise maxima (not a reduction over the size-3 axis) and one hue quotient per pixel (not
    one per sector, picked afterwards) make it 3x faster on the decode stage's 64x36 frames, where it
    was a fifth of a video's curation time; the figures are the same to the bit (and the same with
    or without ``out`` and ``scratch``)."""
    lead = frames.shape[:-1]
    if out is None:
        out = np.empty(frames.shape, np.float32)
    rgb, v, delta, h, tmp, is_r, is_g, mask = (HSVScratch(lead) if scratch is None else scratch).arrays(lead)
    np.divide(frames, _255, out=rgb, dtype=np.float32)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    np.maximum(r, g, out=v)
    np.maximum(v, b, out=v)
    np.minimum(r, g, out=delta)
    np.minimum(delta, b, out=delta)
    np.subtract(v, delta, out=delta)
    # the sector of the hue circle: the maximum's channel (red wins ties, then green)
    np.equal(v, r, out=is_r)
    np.equal(v, g, out=is_g)
    np.greater(is_g, is_r, out=is_g)  # green's and not red's
    np.subtract(r, g, out=h)  # blue's sector
    np.subtract(b, r, out=tmp)
    np.copyto(h, tmp, where=is_g)
    np.subtract(g, b, out=tmp)
    np.copyto(h, tmp, where=is_r)
    np.maximum(delta, _TINY, out=tmp)
    h /= tmp
    tmp.fill(_FOUR)  # the sector's offset, added to every pixel (red's + 0 too: the same bits as before)
    np.copyto(tmp, _TWO, where=is_g)
    np.copyto(tmp, _ZERO, where=is_r)
    h += tmp
    h *= _60
    np.less(h, _ZERO, out=mask)
    np.add(h, _360, out=h, where=mask)  # the red sector's negative side wraps to (300, 360)
    np.less_equal(delta, _ZERO, out=mask)
    np.copyto(h, _ZERO, where=mask)  # grey: no hue
    np.multiply(h, np.float32(0.5), out=out[..., 0])
    np.maximum(v, _TINY, out=tmp)
    np.divide(delta, tmp, out=out[..., 1])
    out[..., 1] *= _255
    np.multiply(v, _255, out=out[..., 2])
    return out
