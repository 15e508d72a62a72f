"""RGB -> HSV on OpenCV's scales, against the standard library's colorsys on every sector, the
sector boundaries (ties), greys, black and white."""

from __future__ import annotations

import colorsys

import numpy as np

from vfm_curator.colour import rgb_to_hsv


def test_rgb_to_hsv_matches_colorsys_on_a_grid_with_ties_greys_black_and_white():
    steps = np.arange(0, 256, 15, dtype=np.uint8)  # 0, 15, ..., 255: ties between channels included
    pixels = np.stack(np.meshgrid(steps, steps, steps, indexing="ij"), axis=-1).reshape(-1, 3)
    got = rgb_to_hsv(pixels.reshape(-1, 1, 3)).reshape(-1, 3)
    want = np.array([colorsys.rgb_to_hsv(*(p / 255.0)) for p in pixels.astype(np.float64)])
    want *= [180.0, 255.0, 255.0]
    want[:, 0] %= 180.0
    hue_gap = np.abs(got[:, 0] - want[:, 0])
    hue_gap = np.minimum(hue_gap, 180.0 - hue_gap)  # hue lives on a circle: 179.99 and 0 are close
    assert hue_gap.max() < 1e-3 and np.abs(got[:, 1:] - want[:, 1:]).max() < 1e-3
    grey = pixels[:, 0] == pixels[:, 1]
    grey &= pixels[:, 1] == pixels[:, 2]
    assert (got[grey, 0] == 0).all() and (got[grey, 1] == 0).all()
    assert got.dtype == np.float32 and ((got[:, 0] >= 0) & (got[:, 0] < 180)).all()


def test_rgb_to_hsv_keeps_any_leading_shape():
    frames = np.random.default_rng(0).integers(0, 256, (2, 3, 5, 7, 3), dtype=np.uint8)
    assert rgb_to_hsv(frames).shape == frames.shape
    np.testing.assert_array_equal(rgb_to_hsv(frames)[1, 2], rgb_to_hsv(frames[1, 2]))
