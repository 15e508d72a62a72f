"""The ``pixel`` tokenizer is an exact space-to-depth fold."""

import pytest
import torch

import vfm_models


def test_pixel_tokenizer_round_trip_is_exact_and_shapes_agree():
    tok = vfm_models.get_tokenizer("pixel")(patch=2)
    video = torch.rand(2, 3, 5, 8, 12) * 2 - 1
    latent = tok.encode(video)
    assert latent.shape == tok.latent_shape(video.shape) == (2, 12, 5, 4, 6)
    assert torch.equal(tok.decode(latent), video)


def test_pixel_tokenizer_rejects_sizes_not_divisible_by_patch():
    tok = vfm_models.get_tokenizer("pixel")(patch=4)
    with pytest.raises(ValueError, match="divisible by 4; got 6x8"):
        tok.latent_shape((3, 1, 6, 8))
