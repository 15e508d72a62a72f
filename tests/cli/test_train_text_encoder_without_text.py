"""``vfm train``: a text encoder, or its options, configured for a model that takes no text is refused
naming the family and the key (it was dropped without a word: the export recorded no encoder)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.toml"  # family dit, class-conditional


@pytest.mark.parametrize("setting, key", [('model.text_encoder="hash"', "model.text_encoder"),
                                          ("model.text_encoder_options.dim=16", "model.text_encoder_options")])
def test_a_text_encoder_setting_for_a_family_that_takes_no_text_is_refused_naming_family_and_key(setting, key):
    result = CliRunner().invoke(app, ["train", str(TINY), "--validate", "--set", setting])
    assert result.exit_code == 1, result.output
    assert f"config key '{key}'" in result.output
    assert "this model of family 'dit' takes no text" in result.output
    assert "Traceback" not in result.output
