"""``vfm convert`` options checked against the checkpoint before anything is written: a
``--latent-shape`` whose channels are not the model's input channels was written into the export and
failed only at ``vfm generate``."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from vfm_cli.main import app

diffusers = pytest.importorskip("diffusers")


def _dit_folder(path):
    torch.manual_seed(0)
    model = diffusers.DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=16, in_channels=3, out_channels=6,
                                            num_layers=2, sample_size=8, patch_size=2, num_embeds_ada_norm=10)
    shared = model.transformer_blocks[0].norm1.emb.state_dict()
    for block in model.transformer_blocks[1:]:
        block.norm1.emb.load_state_dict(shared)
    model.save_pretrained(path)


def test_a_latent_shape_with_other_channels_than_the_model_takes_is_refused_before_writing(tmp_path):
    _dit_folder(tmp_path / "dit")
    out = tmp_path / "export"
    result = CliRunner().invoke(app, ["convert", str(tmp_path / "dit"), "-o", str(out), "--latent-shape", "4,1,16,16"])
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "error: refusing to export to" in text, text  # save_export's check of what the export names
    assert "latent_shape [4, 1, 16, 16] has 4 channels but the model takes 3 (in_channels)" in text, text
    assert not (out / "config.json").exists()
    result = CliRunner().invoke(app, ["convert", str(tmp_path / "dit"), "-o", str(out), "--latent-shape", "3,1,16,16"])
    assert result.exit_code == 0, result.output
