"""The ``sd-vae`` tokenizer: the Stable Diffusion VAE DiT works in (diffusers' ``AutoencoderKL``,
tiny and random here, saved by diffusers), frame by frame, with the config's scaling factor; and a
converted DiT decoded through it by ``vfm generate``."""

from __future__ import annotations

import json
import sys

import pytest
import torch

import vfm_models

diffusers = pytest.importorskip("diffusers")

SCALE = 0.18215


def make_vae_folder(folder, scaling_factor=SCALE, **overrides):
    """A tiny random AutoencoderKL with SD's layout (3 -> 4 channels, 8x space), saved by diffusers."""
    torch.manual_seed(0)
    vae = diffusers.AutoencoderKL(**{**dict(
        in_channels=3, out_channels=3, latent_channels=4, layers_per_block=1, norm_num_groups=4,
        block_out_channels=(8, 8, 8, 8), down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4, sample_size=32, scaling_factor=scaling_factor), **overrides}).eval()
    vae.save_pretrained(folder)
    return vae


def test_sd_vae_encodes_and_decodes_each_frame_like_autoencoder_kl_with_its_scaling_factor(tmp_path):
    vae = make_vae_folder(tmp_path / "pipeline" / "vae", scaling_factor=0.5)  # not SD's: read from the config
    tok = vfm_models.get_tokenizer("sd-vae")(tmp_path / "pipeline", frames=2)  # a pipeline folder: its vae/
    assert (tok.temporal_compression, tok.spatial_compression, tok.latent_channels, tok.scaling_factor) == (1, 8, 4, 0.5)
    video = torch.rand(2, 3, 3, 16, 24) * 2 - 1
    latent = tok.encode(video)
    assert latent.shape == tok.latent_shape(video.shape) == (2, 4, 3, 2, 3)
    with torch.no_grad():
        for b in range(2):
            for t in range(3):  # each frame alone, as DiTPipeline / diffusers' image pipelines encode
                direct = vae.encode(video[b:b + 1, :, t]).latent_dist.mode() * 0.5
                torch.testing.assert_close(latent[b:b + 1, :, t], direct, rtol=1e-5, atol=1e-6)
        pixels = tok.decode(latent)
        assert pixels.shape == video.shape
        for t in range(3):
            torch.testing.assert_close(pixels[:, :, t], vae.decode(latent[:, :, t] / 0.5).sample, rtol=1e-5, atol=1e-6)
    image = video[0, :, :1]  # unbatched (C, T=1, H, W), a DiT image
    z = tok.encode(image)
    assert z.shape == (4, 1, 2, 3)
    torch.testing.assert_close(z, latent[0, :, :1], rtol=1e-5, atol=1e-6)
    assert tok.decode(z).shape == (3, 1, 16, 24)
    assert vfm_models.get_tokenizer("sd-vae")(tmp_path / "pipeline", scaling_factor=2.0).scaling_factor == 2.0


def test_sd_vae_refuses_missing_folders_non_safetensors_bad_shapes_and_says_when_diffusers_is_missing(tmp_path, monkeypatch):
    vae = make_vae_folder(tmp_path / "vae")
    tok = vfm_models.get_tokenizer("sd-vae")(tmp_path / "vae")
    assert tok.scaling_factor == SCALE
    with pytest.raises(ValueError, match="accepts heights and widths divisible by 8; got 12x16"):
        tok.encode(torch.zeros(1, 3, 1, 12, 16))
    with pytest.raises(ValueError, match="expects 3 channels, got 4"):
        tok.encode(torch.zeros(1, 4, 1, 16, 16))
    with pytest.raises(ValueError, match=r"decodes latents \(B, 4, T', H', W'\)"):
        tok.decode(torch.zeros(1, 16, 1, 2, 2))
    with pytest.raises(FileNotFoundError, match=r"not an AutoencoderKL folder .*sd-vae-ft-ema"):
        vfm_models.get_tokenizer("sd-vae")(tmp_path / "nothing")
    vae.save_pretrained(tmp_path / "pickled", safe_serialization=False)  # diffusion_pytorch_model.bin only
    with pytest.raises(ValueError, match=r"holds no \.safetensors weights \(only diffusion_pytorch_model\.bin\)"):
        vfm_models.get_tokenizer("sd-vae")(tmp_path / "pickled")
    config = json.loads((tmp_path / "vae" / "config.json").read_text())
    (tmp_path / "vae" / "config.json").write_text(json.dumps({**config, "scaling_factor": 0}))
    with pytest.raises(ValueError, match="scaling_factor 0; it must be a positive number"):
        vfm_models.get_tokenizer("sd-vae")(tmp_path / "vae")
    monkeypatch.setitem(sys.modules, "diffusers", None)  # as if diffusers were not installed
    with pytest.raises(ImportError, match="sd-vae tokenizer needs diffusers"):
        vfm_models.get_tokenizer("sd-vae")(tmp_path / "vae")


def test_vfm_convert_with_the_sd_vae_then_generate_decodes_a_converted_dit_to_a_png(tmp_path):
    """A tiny diffusers DiT over SD latents (4 -> 8 channels, learned sigma, 4x4 latents) converted with
    ``--tokenizer sd-vae --tokenizer-option path=...``; ``vfm generate`` writes a 32x32 image."""
    pytest.importorskip("vfm_models.formulations.ddpm")
    from tests.cli.test_convert_export import diffusers_folder, invoke
    from vfm_infer.video.contact_sheet import read_png

    make_vae_folder(tmp_path / "weights" / "sd-vae-ft-ema")
    diffusers_folder(tmp_path / "hub", in_channels=4, out_channels=8, sample_size=4)
    result = invoke("convert", tmp_path / "hub", "-o", tmp_path / "export", "--tokenizer", "sd-vae",
                    "--tokenizer-option", f"path={tmp_path / 'weights' / 'sd-vae-ft-ema'}")
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "export" / "config.json").read_text())
    assert meta["tokenizer"] == "sd-vae" and meta["latent_shape"] == [4, 1, 4, 4]
    result = invoke("generate", "--checkpoint", tmp_path / "export", "--weights-root", tmp_path / "weights",
                    "--prompt", "3", "--steps", "2", "--seed", "1", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    image = read_png(tmp_path / "out" / "0000.png")
    assert image.shape == (32, 32, 3) and image.std() > 0
