"""``model.init_from`` refuses a model option that keeps every tensor's shape but changes what the
weights mean (the head count over the same width, the position embedding, the timestep features):
the checkpoint would load and compute something else. A runtime choice (the attention backend) may
still change."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app

pytest.importorskip("diffusers")
pytest.importorskip("vfm_models.formulations.ddpm")  # the formulation DiT was trained with

from tests.cli.test_train_init_from import CONFIG, _hub  # noqa: E402  (the same tiny random diffusers DiT)


def _validate(tmp_path, *sets):
    config = tmp_path / "finetune.toml"
    config.write_text(CONFIG.format(init=tmp_path / "hub", out=tmp_path / "run"))
    return CliRunner().invoke(app, ["train", str(config), "--validate", *[a for s in sets for a in ("--set", s)]])


@pytest.mark.parametrize("setting, value, said", [
    ("num_heads", "4", "num_heads = 4 where the checkpoint has 2"),  # hidden 32: 2 heads of 16 -> 4 of 8, same shapes
    ("pos_embed", "'sincos'", "pos_embed = 'sincos' where the checkpoint has 'sincos2d'"),  # no weights: 2-D table -> 3-D
    ("timestep_freq_shift", "0", "timestep_freq_shift = 0 where the checkpoint has 1"),  # diffusers' features -> DiT's
    ("norm", "'rms'", "norm = 'rms' where the checkpoint has 'layer'"),  # the blocks' norms have no affine weights
])
def test_a_shape_preserving_option_change_is_refused_naming_the_option(tmp_path, setting, value, said):
    _hub(tmp_path / "hub")  # 2 layers, 2 heads of 16, sincos2d, timestep_freq_shift 1
    result = _validate(tmp_path, f"model.options.{setting}={value}")
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"config key 'model.options.{setting}'" in text
    assert said in text
    assert "remove model.init_from" in text  # how to start fresh instead
    assert not (tmp_path / "run").exists()


def test_the_checkpoint_s_own_values_and_a_runtime_option_still_validate(tmp_path):
    _hub(tmp_path / "hub")
    result = _validate(tmp_path, "model.options.num_heads=2", "model.options.pos_embed='sincos2d'",
                       "model.options.attention_backend='sdpa'")
    assert result.exit_code == 0, result.output
