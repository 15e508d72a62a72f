"""The ``causal3d`` tokenizer: causal in time, exact chunking and tiling, trainable, safetensors weights."""

from __future__ import annotations

import pytest
import torch

import vfm_models
from vfm_models.checkpoint import CheckpointMismatchError

TINY = dict(base_channels=8, channel_mult=(1, 1, 2, 2), latent_channels=4)


def tiny(tc: int = 4, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    return vfm_models.get_tokenizer("causal3d")(temporal_compression=tc, **{**TINY, **kw}).eval()


@pytest.mark.parametrize("tc", [4, 8])
@pytest.mark.parametrize("frames_k", [0, 2])
def test_round_trip_shapes_for_images_and_videos(tc, frames_k):
    tok = tiny(tc)
    video = torch.rand(2, 3, 1 + frames_k * tc, 16, 24) * 2 - 1
    with torch.no_grad():
        latent = tok.encode(video)
        assert latent.shape == tok.latent_shape(video.shape) == (2, 4, 1 + frames_k, 2, 3)
        assert tok.decode(latent).shape == video.shape


@pytest.mark.parametrize("tc", [4, 8])
def test_encode_and_decode_are_causal_in_time(tc):
    tok = tiny(tc)
    video = torch.rand(1, 3, 1 + 3 * tc, 16, 16) * 2 - 1
    with torch.no_grad():
        latent = tok.encode(video)
        pixels = tok.decode(latent)
        for j in range(3):  # latent frame j covers pixel frames up to j * tc
            later = video.clone()
            later[:, :, j * tc + 1 :] = torch.rand_like(later[:, :, j * tc + 1 :])
            changed = tok.encode(later)
            torch.testing.assert_close(changed[:, :, : j + 1], latent[:, :, : j + 1], rtol=0, atol=1e-6)
            assert not torch.allclose(changed[:, :, j + 1 :], latent[:, :, j + 1 :])

            later_latent = latent.clone()
            later_latent[:, :, j + 1 :] += 1.0
            decoded = tok.decode(later_latent)
            torch.testing.assert_close(decoded[:, :, : j * tc + 1], pixels[:, :, : j * tc + 1], rtol=0, atol=1e-6)
            assert not torch.allclose(decoded[:, :, j * tc + 1 :], pixels[:, :, j * tc + 1 :])


def test_spatial_tiles_equal_the_whole_frame_with_the_default_halo():
    # No res blocks keeps the receptive field (so the halo: 4 latents encoding, 6 decoding) small
    # enough that 4x4-latent tiles of the 10x10-latent frame are genuinely cut out of it.
    tok = tiny(4, num_res_blocks=0)
    video = torch.rand(1, 3, 5, 80, 80) * 2 - 1
    with torch.no_grad():
        latent, pixels = tok.encode(video), tok.decode(tok.encode(video))
        tok.tile = 4
        torch.testing.assert_close(tok.encode(video), latent, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(tok.decode(latent), pixels, rtol=1e-4, atol=1e-5)
        tok.halo = 0  # without the halo the seams show: the comparison above is not vacuous
        assert not torch.allclose(tok.encode(video), latent, atol=1e-3)
        assert not torch.allclose(tok.decode(latent), pixels, atol=1e-3)


def test_temporal_chunks_equal_the_whole_video():
    tok = tiny(4)
    video = torch.rand(1, 3, 1 + 3 * 4, 16, 16) * 2 - 1
    with torch.no_grad():
        latent, pixels = tok.encode(video), tok.decode(tok.encode(video))
        tok.chunk = 1  # frames 1, 4, 4, 4 -> one latent frame at a time, streamed
        torch.testing.assert_close(tok.encode(video), latent, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(tok.decode(latent), pixels, rtol=1e-4, atol=1e-5)


def test_a_few_training_steps_lower_the_reconstruction_loss():
    torch.manual_seed(0)
    tok = vfm_models.get_tokenizer("causal3d")(
        temporal_compression=4, base_channels=8, channel_mult=(1, 1, 1, 1), latent_channels=4, num_res_blocks=0
    )
    g = torch.Generator().manual_seed(0)
    video = (torch.rand(4, 3, 1, 1, 1, generator=g) * 2 - 1).expand(4, 3, 5, 16, 16).contiguous()  # flat colours
    opt = torch.optim.Adam(tok.parameters(), lr=3e-3)
    losses = []
    for _ in range(60):
        loss = torch.nn.functional.mse_loss(tok(video), video)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    end = sum(losses[-5:]) / 5
    zero_baseline = video.pow(2).mean().item()  # what predicting 0 would score
    print(f"causal3d reconstruction MSE {losses[0]:.4f} -> {end:.4f} (predicting 0: {zero_baseline:.4f})")
    assert end < 0.5 * losses[0] and end < 0.5 * zero_baseline, losses


def test_weights_round_trip_through_safetensors_and_mismatch_is_named(tmp_path):
    tok = tiny(4)
    path = tmp_path / "causal3d.safetensors"
    tok.save(path)
    video = torch.rand(1, 3, 5, 16, 16) * 2 - 1
    loaded = vfm_models.get_tokenizer("causal3d")(temporal_compression=4, weights=path, **TINY).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded.encode(video), tok.encode(video), rtol=0, atol=0)
    with pytest.raises(CheckpointMismatchError, match=r"encoder\.conv_out\.conv\.weight: weights \(4, 16"):
        vfm_models.get_tokenizer("causal3d")(weights=path, **{**TINY, "latent_channels": 8})


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((1, 3, 6, 16, 16), r"accepts 1 \+ k\*4 frames \(1, 5, 9, ...\); got 6"),
        ((1, 3, 5, 12, 16), r"divisible by 8; got 12x16"),
        ((1, 1, 5, 16, 16), r"expects 3 channels, got 1"),
    ],
)
def test_bad_input_shapes_say_which_shapes_are_accepted(shape, message):
    tok = tiny(4)
    with pytest.raises(ValueError, match=message):
        tok.encode(torch.zeros(shape))
    with pytest.raises(ValueError, match=r"decodes latents \(B, 4, T', H', W'\)"):
        tok.decode(torch.zeros(1, 3, 2, 2, 2))
    with pytest.raises(ValueError, match=r"temporal_compression must be one of \(1, 2, 4, 8\), got 3"):
        vfm_models.get_tokenizer("causal3d")(temporal_compression=3)
