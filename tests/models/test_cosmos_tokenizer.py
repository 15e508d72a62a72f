"""The ``cosmos`` tokenizer loads TorchScript encoder/decoder checkpoints from a folder."""

from __future__ import annotations

import warnings

import pytest
import torch

import vfm_models


class TupleOut(torch.nn.Module):
    """Cosmos' continuous encoders return a tuple whose first item is the latent."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor):
        z = self.inner(x)
        return z, z.mean()


def save_jit(module: torch.nn.Module, example: torch.Tensor, path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.save(torch.jit.trace(module.eval(), example), str(path))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A Cosmos-style folder made from a tiny causal3d autoencoder, traced to TorchScript."""
    torch.manual_seed(0)
    ref = vfm_models.get_tokenizer("causal3d")(base_channels=8, channel_mult=(1, 1, 1, 1), latent_channels=6, num_res_blocks=0)
    folder = tmp_path_factory.mktemp("ckpt") / "Cosmos-Tokenizer-CV4x8x8"
    folder.mkdir()
    video = torch.rand(1, 3, 5, 16, 16) * 2 - 1
    save_jit(TupleOut(ref.encoder), video, folder / "encoder.jit")
    save_jit(ref.decoder, ref.encoder(video).detach(), folder / "decoder.jit")
    return ref.eval(), folder


def test_cosmos_checkpoint_encodes_and_decodes_like_the_module_it_was_saved_from(checkpoint):
    ref, folder = checkpoint
    tok = vfm_models.get_tokenizer("cosmos")(folder, allow_torchscript=True)
    assert (tok.temporal_compression, tok.spatial_compression, tok.latent_channels) == (4, 8, 6)
    video = torch.rand(2, 3, 9, 24, 16) * 2 - 1  # other sizes than the traced example
    latent = tok.encode(video)
    assert latent.shape == tok.latent_shape(video.shape) == (2, 6, 3, 3, 2)
    with torch.no_grad():
        torch.testing.assert_close(latent, ref.encode(video), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(tok.decode(latent), ref.decode(latent), rtol=1e-4, atol=1e-5)


def test_cosmos_errors_name_the_problem(checkpoint, tmp_path):
    _, folder = checkpoint
    tok = vfm_models.get_tokenizer("cosmos")(folder, allow_torchscript=True)
    with pytest.raises(ValueError, match=r"accepts 1 \+ k\*4 frames"):
        tok.encode(torch.zeros(1, 3, 4, 16, 16))
    with pytest.raises(FileNotFoundError, match="no encoder.jit"):
        vfm_models.get_tokenizer("cosmos")(tmp_path, allow_torchscript=True)
    renamed = tmp_path / "my-tokenizer"
    renamed.mkdir()
    for name in ("encoder.jit", "decoder.jit"):
        (renamed / name).write_bytes((folder / name).read_bytes())
    with pytest.raises(ValueError, match="pass temporal_compression and spatial_compression"):
        vfm_models.get_tokenizer("cosmos")(renamed, allow_torchscript=True)
    explicit = vfm_models.get_tokenizer("cosmos")(renamed, temporal_compression=4, spatial_compression=8, allow_torchscript=True)
    assert explicit.latent_channels == 6
