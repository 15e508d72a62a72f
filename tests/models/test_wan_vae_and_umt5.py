"""What a converted Wan needs around it, from local folders: the ``wan-vae`` tokenizer (diffusers'
``AutoencoderKLWan``, tiny and random here) and UMT5 through the ``t5`` text encoder, whose
embeddings are exactly the ones diffusers' ``WanPipeline`` feeds its transformer."""

from __future__ import annotations

import sys

import pytest
import torch

import vfm_models

diffusers = pytest.importorskip("diffusers")

Z = 4
MEAN, STD = [0.5, -0.2, 0.1, 0.0], [2.0, 0.5, 1.5, 1.0]


def make_vae_folder(folder):
    """A tiny random AutoencoderKLWan with Wan 2.1's layout (8x space, 4x time), saved by diffusers."""
    torch.manual_seed(0)
    vae = diffusers.AutoencoderKLWan(base_dim=8, z_dim=Z, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                                     temperal_downsample=[False, True, True], latents_mean=MEAN, latents_std=STD).eval()
    vae.save_pretrained(folder)
    return vae


def test_wan_vae_encodes_and_decodes_like_autoencoder_kl_wan_with_wans_latent_normalisation(tmp_path):
    vae = make_vae_folder(tmp_path / "pipeline" / "vae")
    tok = vfm_models.get_tokenizer("wan-vae")(tmp_path / "pipeline")  # a pipeline folder: its vae/
    assert (tok.temporal_compression, tok.spatial_compression, tok.latent_channels) == (4, 8, Z)
    video = torch.rand(1, 3, 5, 16, 24) * 2 - 1
    latent = tok.encode(video)
    assert latent.shape == tok.latent_shape(video.shape) == (1, Z, 2, 2, 3)
    mean, std = torch.tensor(MEAN).view(1, Z, 1, 1, 1), torch.tensor(STD).view(1, Z, 1, 1, 1)
    with torch.no_grad():
        direct = vae.encode(video).latent_dist.mode()
        torch.testing.assert_close(latent, (direct - mean) / std)
        pixels = tok.decode(latent)
        assert pixels.shape == video.shape
        torch.testing.assert_close(pixels, vae.decode(latent * std + mean).sample)


def test_wan_vae_refuses_bad_frames_missing_folders_and_says_when_diffusers_is_missing(tmp_path, monkeypatch):
    make_vae_folder(tmp_path / "vae")
    tok = vfm_models.get_tokenizer("wan-vae")(tmp_path / "vae")
    with pytest.raises(ValueError, match=r"accepts 1 \+ k\*4 frames .* got 4"):
        tok.encode(torch.zeros(1, 3, 4, 16, 16))
    with pytest.raises(ValueError, match=r"decodes latents \(B, 4, T', H', W'\)"):
        tok.decode(torch.zeros(1, 16, 1, 2, 2))
    with pytest.raises(FileNotFoundError, match="not an AutoencoderKLWan folder"):
        vfm_models.get_tokenizer("wan-vae")(tmp_path / "nothing")
    monkeypatch.setitem(sys.modules, "diffusers", None)  # as if diffusers were not installed
    with pytest.raises(ImportError, match="wan-vae tokenizer needs diffusers"):
        vfm_models.get_tokenizer("wan-vae")(tmp_path / "vae")


def test_umt5_from_a_pipelines_text_encoder_and_tokenizer_folders_gives_wan_pipelines_prompt_embeddings(tmp_path):
    from types import SimpleNamespace

    from diffusers import WanPipeline

    from tests.models.test_text_encoders import TEXTS, make_t5_folder

    # a diffusers Wan pipeline's layout: the encoder in text_encoder/, its tokenizer in tokenizer/
    umt5 = make_t5_folder(tmp_path / "text_encoder", "umt5")
    (tmp_path / "tokenizer").mkdir()
    for file in (tmp_path / "text_encoder").glob("*"):
        if file.name.startswith(("tokenizer", "special_tokens")):
            file.rename(tmp_path / "tokenizer" / file.name)
    length = 10  # Wan: 512
    enc = vfm_models.get_text_encoder("t5")(tmp_path / "text_encoder", tokenizer_path=tmp_path / "tokenizer",
                                            max_length=length, pad_to_max_length=True)
    text, mask = enc.encode(TEXTS)
    pipe = SimpleNamespace(tokenizer=enc.tokenizer, text_encoder=umt5)
    with torch.no_grad():
        wan = WanPipeline._get_t5_prompt_embeds(pipe, TEXTS, max_sequence_length=length, device="cpu",
                                                dtype=torch.float32)
    assert text.shape == wan.shape == (len(TEXTS), length, 16)  # Wan: (B, 512, 4096), zero past each prompt
    torch.testing.assert_close(text, wan, rtol=1e-5, atol=1e-6)
    assert bool((text[~mask] == 0).all()) and not bool(mask.all())
    model = vfm_models.get_family("wan").create("tiny")
    out = model(torch.randn(len(TEXTS), 4, 1, 4, 4), torch.rand(len(TEXTS)), {"text": text, "text_mask": mask})
    assert out.shape == (len(TEXTS), 4, 1, 4, 4)


def test_vfm_generate_samples_a_converted_wan_with_the_wan_vae_and_umt5(tmp_path):
    """End to end, all from local folders: a diffusers Wan converted to an export that names the
    wan-vae tokenizer and UMT5 (t5) encoder; ``vfm generate`` writes a 5-frame 32x48 MP4."""
    av = pytest.importorskip("av")
    from typer.testing import CliRunner

    from tests.models.test_text_encoders import make_t5_folder
    from tests.models.test_wan_family import random_diffusers
    from vfm_cli.main import app
    from vfm_models.adapters.exports import convert_to_export

    random_diffusers(seed=2).save_pretrained(tmp_path / "hub")
    export = tmp_path / "export"
    make_vae_folder(export / "vae")
    make_t5_folder(export / "umt5", "umt5")
    convert_to_export(tmp_path / "hub", export, meta={
        "tokenizer": "wan-vae", "tokenizer_options": {"path": "vae"}, "latent_shape": [Z, 2, 4, 6],
        "text_encoder": "t5", "text_encoder_options": {"path": "umt5", "max_length": 8, "pad_to_max_length": True},
    })
    result = CliRunner().invoke(app, ["generate", "--checkpoint", str(export), "--prompt", "a dog", "--steps", "2",
                                      "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    with av.open(str(tmp_path / "out" / "0000.mp4")) as video:
        frames = [f.to_ndarray(format="rgb24") for f in video.decode(video=0)]
    assert len(frames) == 5 and frames[0].shape == (32, 48, 3)
