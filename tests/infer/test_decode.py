"""Chunked and tiled decoding equals decoding in one pass."""

from __future__ import annotations

import pytest
import torch

import vfm_models
from vfm_infer.decode import decode


class SmoothingTokenizer:
    """A real (if tiny) non-trivial decoder: 2x nearest upsampling followed by a 3x3 box blur, so
    tiles see their neighbours' pixels and seams would show without overlap and blending."""

    spatial_compression = 2
    temporal_compression = 1

    def decode(self, latent):
        b, c, t, h, w = latent.shape
        up = torch.nn.functional.interpolate(latent.flatten(1, 2), scale_factor=2, mode="nearest")
        blurred = torch.nn.functional.avg_pool2d(up, 3, stride=1, padding=1, count_include_pad=False)
        return blurred.view(b, c, t, 2 * h, 2 * w)


def test_pixel_tokenizer_tiled_and_chunked_decode_equals_one_pass():
    tok = vfm_models.get_tokenizer("pixel")(patch=2)
    latent = torch.randn(1, 12, 5, 13, 11)
    full = tok.decode(latent)
    torch.testing.assert_close(decode(tok, latent, chunk_frames=2, tile=4, overlap=1), full)
    torch.testing.assert_close(decode(tok, latent, chunk_frames=3, tile=6, overlap=0), full)


def test_overlapping_tiles_blend_a_local_decoder_close_to_one_pass():
    tok = SmoothingTokenizer()
    latent = torch.randn(1, 3, 2, 24, 24)
    full = tok.decode(latent)
    blended = decode(tok, latent, tile=10, overlap=4)
    hard = decode(tok, latent, tile=8, overlap=0)
    # A 3x3 blur reaches one pixel across a seam; the ramps keep tile borders out of the result.
    assert (blended - full).abs().max() < (hard - full).abs().max()
    assert (blended - full).abs().mean() < 0.02


def test_decode_rejects_an_overlap_as_large_as_the_tile():
    tok = vfm_models.get_tokenizer("pixel")()
    with pytest.raises(ValueError, match="overlap"):
        decode(tok, torch.zeros(1, 3, 1, 8, 8), tile=4, overlap=4)


def test_a_tokenizer_that_tiles_itself_decodes_chunked_with_its_own_scheme():
    tok = vfm_models.get_tokenizer("causal3d")(temporal_compression=4, spatial_compression=8)
    latent = torch.randn(1, tok.latent_channels, 3, 4, 4)
    with torch.no_grad():
        full = tok.decode(latent)
        chunked = decode(tok, latent, chunk_frames=1)
    torch.testing.assert_close(chunked, full, rtol=1e-4, atol=1e-4)
    assert tok.chunk is None  # the tokenizer's own setting is restored
