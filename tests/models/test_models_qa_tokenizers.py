"""Tokenizer inputs of the wrong rank get an error that says what ``encode``/``decode`` take, on a real
H.264 clip decoded with PyAV (the causal3d tokenizer) and on a tiny random ``AutoencoderKLWan``."""

from __future__ import annotations

import io

import pytest
import torch

import vfm_models


def h264_clip(frames: int = 9, size: int = 32) -> torch.Tensor:
    """A moving square encoded to H.264 and decoded back: (1, 3, T, H, W) in [-1, 1]."""
    av = pytest.importorskip("av")
    import numpy as np

    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=8)
        stream.width = stream.height = size
        stream.pix_fmt = "yuv420p"
        for i in range(frames):
            img = np.zeros((size, size, 3), np.uint8)
            img[8 + i : 16 + i, 4:20, 1] = 200
            img[..., 2] = np.arange(size, dtype=np.uint8)[None] * 8
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    buf.seek(0)
    with av.open(buf) as container:
        decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    return torch.from_numpy(np.stack(decoded)).permute(3, 0, 1, 2)[None].float() / 127.5 - 1


def test_causal3d_encode_of_an_unbatched_clip_says_it_takes_a_batch():
    """It was an IndexError ('tuple index out of range') though ``latent_shape`` takes (C, T, H, W)."""
    video = h264_clip()
    tok = vfm_models.get_tokenizer("causal3d")(latent_channels=4, base_channels=8)
    assert tok.latent_shape(tuple(video[0].shape)) == (4, 3, 4, 4)
    with torch.no_grad():
        assert tok.encode(video).shape == (1, 4, 3, 4, 4)
        with pytest.raises(ValueError, match=r"causal3d encodes a batch of videos \(B, C, T, H, W\); got shape "
                                             r"\(3, 9, 32, 32\) \(add the batch dimension"):
            tok.encode(video[0])
        with pytest.raises(ValueError, match=r"batch of videos"):
            tok(video[0])


def test_pixel_tokenizer_names_the_shapes_it_takes():
    """encode of (C, T, H, W) was 'not enough values to unpack'; decode of a latent with the wrong channel
    count was a reshape error."""
    tok = vfm_models.get_tokenizer("pixel")(patch=2)
    with pytest.raises(ValueError, match=r"pixel tokenizer encodes a batch of videos \(B, C, T, H, W\)"):
        tok.encode(torch.zeros(3, 2, 4, 4))
    with pytest.raises(ValueError, match=r"pixel tokenizer decodes latents \(B, 12, T, H', W'\); got shape \(1, 8, 2, 2, 2\)"):
        tok.decode(torch.zeros(1, 8, 2, 2, 2))


def test_wan_vae_encode_of_an_unbatched_clip_and_a_wrong_dtype_name_say_what_is_accepted(tmp_path):
    pytest.importorskip("diffusers")
    from tests.models.test_wan_vae_and_umt5 import make_vae_folder

    make_vae_folder(tmp_path)
    tokenizer = vfm_models.get_tokenizer("wan-vae")
    with pytest.raises(ValueError, match=r"wan-vae tokenizer: dtype must be a floating-point dtype, one of "
                                         r"float32, float16, bfloat16, float64, .*got 'bfloat17'"):
        tokenizer(path=tmp_path, dtype="bfloat17")  # was AttributeError: module 'torch' has no attribute
    tok = tokenizer(path=tmp_path, dtype="fp32")  # the curator's and the pipeline's short name
    with pytest.raises(ValueError, match=r"wan-vae encodes a batch of videos"):  # was diffusers' unpack error
        tok.encode(torch.zeros(3, 5, 16, 16))


@pytest.mark.parametrize("shape", [(1, 4, 0, 2, 2), (1, 4, 1, 0, 2)])
def test_causal3d_decode_of_an_empty_latent_names_the_shape_it_takes(shape):
    """It was torch's "expanded size" / "Kernel size can't be greater than actual input size"."""
    tok = vfm_models.get_tokenizer("causal3d")(latent_channels=4, base_channels=8)
    with pytest.raises(ValueError, match=r"causal3d decodes latents \(B, 4, T', H', W'\) with T', H', W' >= 1; "
                                         r"got shape " + str(shape).replace("(", r"\(").replace(")", r"\)")):
        tok.decode(torch.zeros(shape))


def test_tokenizers_refuse_uint8_frames_naming_the_pixel_range_they_take(tmp_path):
    """A decoded clip as PyAV gives it (uint8, 0..255): the pixel tokenizer encoded it as it was (latents of
    0..255, silently), the wan-vae and sd-vae cast it to float (the same, silently), causal3d failed inside a
    convolution ("Input type (unsigned char) and bias type (float) should be the same")."""
    frames = ((h264_clip() + 1) * 127.5).round().to(torch.uint8)
    pytest.importorskip("diffusers")
    from tests.models.test_sd_vae_tokenizer import make_vae_folder as make_sd_vae_folder
    from tests.models.test_wan_vae_and_umt5 import make_vae_folder

    make_vae_folder(tmp_path / "wan")
    make_sd_vae_folder(tmp_path / "sd")
    tokenizers = {"pixel": vfm_models.get_tokenizer("pixel")(patch=2),
                  "causal3d": vfm_models.get_tokenizer("causal3d")(latent_channels=4, base_channels=8),
                  "wan-vae": vfm_models.get_tokenizer("wan-vae")(path=tmp_path / "wan", dtype="fp32"),
                  "sd-vae": vfm_models.get_tokenizer("sd-vae")(tmp_path / "sd")}
    for name, tok in tokenizers.items():
        with pytest.raises(ValueError, match=rf"{name}.* takes pixels in \[-1, 1\] as a floating-point tensor; got "
                                             r"torch\.uint8 \(frames 0\.\.255: video\.float\(\) / 127\.5 - 1\)"):
            tok.encode(frames)


def test_causal3d_takes_videos_and_latents_of_another_float_dtype_as_the_other_tokenizers_do():
    """wan-vae, sd-vae and cosmos cast their input to their own dtype; causal3d failed on a bfloat16 latent
    (a bf16 sampler's) with "Input type (c10::BFloat16) and bias type (float) should be the same"."""
    video = h264_clip()
    tok = vfm_models.get_tokenizer("causal3d")(latent_channels=4, base_channels=8)
    with torch.no_grad():
        latent = tok.encode(video)
        assert torch.equal(tok.encode(video.double()), latent)
        assert torch.equal(tok.decode(latent.bfloat16()), tok.decode(latent.bfloat16().float()))
        assert tok.decode(latent.bfloat16()).dtype == torch.float32
