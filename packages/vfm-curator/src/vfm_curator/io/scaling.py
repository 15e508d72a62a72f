"""How frames are scaled: swscale's flags for each case (exact at full size, bilinear, an area
average for the detection sizes), the detection-shrink rule every scaler shares, and the
downscaled display size."""

from __future__ import annotations


# swscale flags (libswscale/swscale.h) for YUV -> rgb24. Without ACCURATE_RND and FULL_CHR_H_INT,
# swscale converts 4:2:0 with its table-driven fast paths, which truncate: measured against an exact
# float conversion of the decoded planes, -1.0/-1.45/-1.0 (R/G/B) at full size and -1.8/-1.2/-1.6
# scaled for limited-range BT.601, -2.3/-1.8/-2.2 scaled for BT.709, -0.5/-1.0/-0.5 full range
# (4:4:4 was already exact). With these flags every tagged case is within 0.15 on average.
_SWS_BILINEAR, _SWS_POINT, _SWS_FULL_CHR_H_INT, _SWS_ACCURATE_RND = 0x2, 0x10, 0x2000, 0x40000
#: full size, formats other than 8-bit 4:2:0 (those go through :func:`_yuv420_as_444`): the exact
#: conversion, correctly rounded; 4:2:0 chroma would be sampled at ``(x + 1) // 2`` across
FULL_SIZE_FLAGS = _SWS_POINT | _SWS_FULL_CHR_H_INT | _SWS_ACCURATE_RND
#: scaled: bilinear (antialiased when shrinking) with chroma scaled to the full output width, rounded
SCALED_FLAGS = _SWS_BILINEAR | _SWS_FULL_CHR_H_INT
_SWS_AREA = 0x20
#: shrunk to a detection size (:func:`scaled_flags`): an area average (a box filter over the source
#: pixels of each output pixel) instead of bilinear's tent, twice as wide, whose taps grow with the
#: factor: 28-36 % cheaper (64x36 from 320x180 0.128 -> 0.092 ms a frame, from 854x480 0.26 -> 0.17,
#: from 1920x1080 0.68 -> 0.44), pixels within 4 levels of bilinear's, the same cuts on
#: benchmarks/shot_detection.py and within tests/curator/test_colour_fidelity.py's bounds
SMALL_FLAGS = _SWS_AREA | _SWS_FULL_CHR_H_INT
#: frames at most this many pixels on each side, shrunk at least 2x both ways, get :data:`SMALL_FLAGS`
SMALL_MAX_SIDE = 128


def scaled_flags(src_w: int, src_h: int, w: int, h: int) -> int:
    """The swscale flags for scaling ``src_w x src_h`` to ``w x h`` (coded orientation).
    :data:`SMALL_FLAGS` for the detection sizes: at most :data:`SMALL_MAX_SIDE` a side and at most
    half the source both ways (every box averages 2x2 source pixels or more): the decode stage's
    64-wide frames, a detector's own (TransNetV2's 48x27), stitch's boundary frames (the decode
    stage's size, so the same pixels). :data:`SCALED_FLAGS` for every other size (shard frames above it,
    sample frames at a model's size, any enlargement), as before."""
    return SMALL_FLAGS if is_detection_shrink(src_w, src_h, w, h) else SCALED_FLAGS


def is_detection_shrink(src_w: int, src_h: int, w: int, h: int) -> bool:
    """Whether ``src_w x src_h -> w x h`` is a shrink to a detection size: at most
    :data:`SMALL_MAX_SIDE` a side and at most half the source both ways. The one rule for every
    scaler: swscale's flags here (:func:`scaled_flags`), the torch area average of the GPU decoders
    and of the torch scorer (:func:`vfm_curator.decoders.yuv.resize_planes`). Symmetric in
    width/height, so coded and display orientation give the same answer."""
    return max(w, h) <= SMALL_MAX_SIDE and 2 * w <= src_w and 2 * h <= src_h


def small_size(width: int, height: int, target_width: int) -> tuple[int, int]:
    """A downscaled display size with the same aspect ratio, both sides even and >= 2."""
    w = max(2, min(target_width, width) // 2 * 2)
    h = max(2, int(round(height * w / max(width, 1))) // 2 * 2)
    return w, h
