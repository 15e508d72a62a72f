"""``vfm convert --tokenizer NAME --tokenizer-option K=V`` on a tiny random diffusers ``WanTransformer3DModel``:
a misspelt option is refused before anything is written, naming the options the tokenizer takes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app

diffusers = pytest.importorskip("diffusers")


def test_convert_refuses_a_tokenizer_option_the_tokenizer_does_not_take(tmp_path):
    diffusers.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24, in_channels=4,
                                    out_channels=4, text_dim=16, freq_dim=32, ffn_dim=64,
                                    num_layers=1).save_pretrained(tmp_path / "wan")
    common = ["convert", str(tmp_path / "wan"), "--tokenizer", "causal3d", "--tokenizer-option", "latent_channels=4"]
    result = CliRunner().invoke(app, [*common, "--tokenizer-option", "temporal_compresion=4", "-o", str(tmp_path / "a")])
    # it was written, and `vfm generate` failed on "unexpected keyword argument 'temporal_compresion'"
    assert result.exit_code == 1, result.output
    assert ("tokenizer 'causal3d' has no option temporal_compresion; options: temporal_compression, "
            "spatial_compression, latent_channels") in result.output
    assert not (tmp_path / "a" / "config.json").exists()

    result = CliRunner().invoke(app, [*common, "--tokenizer-option", "temporal_compression=4", "-o", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "b" / "config.json").read_text())
    assert meta["tokenizer_options"] == {"latent_channels": 4, "temporal_compression": 4}
