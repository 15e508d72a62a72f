"""``vfm train``: non-finite settings, unknown strategies and unknown formulation options are refused
by ``--validate`` with the key named; a run that trains into NaN exits 1 naming the steps and exports
nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.toml"
SMALL = ["train.steps=4", "optim.warmup_steps=0", "logging.tensorboard=false", "logging.progress=false",
         "logging.peak_tflops=1.0", "data.num_samples=16", "model.options.hidden=32", "model.options.num_heads=2"]


def _train(*args: str, sets=()):
    return CliRunner().invoke(app, ["train", str(TINY), *args, *[a for s in sets for a in ("--set", s)]])


@pytest.mark.parametrize(
    "override, message",
    [
        ("optim.lr=inf", "config key 'optim.lr': must be a finite number, got inf"),
        ("optim.weight_decay=inf", "config key 'optim.weight_decay': must be a finite number, got inf"),
        ("optim.eps=nan", "config key 'optim.eps': must be a finite number, got nan"),
        ("model.formulation_options.sigma_data=-inf", "config key 'model.formulation_options.sigma_data': must be a finite number"),
        ('parallel.strategies=["fsdpp"]', "config key 'parallel.strategies': unknown strategy 'fsdpp'; available: ac, compile,"),
        ("model.formulation_options.sigma=0.5",
         "config key 'model.formulation_options.sigma': unknown option of formulation 'edm'; accepted: sigma_data, P_mean"),
    ],
)
def test_validate_refuses_the_setting_naming_the_key(override, message):
    result = _train("--validate", sets=[override])
    assert result.exit_code == 1, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_validate_refuses_an_out_dir_that_cannot_be_made(tmp_path):
    (tmp_path / "file").write_text("x")
    for out_dir, message in ((tmp_path / "file", "is a file; name a folder"), (tmp_path / "file" / "run", "cannot be made")):
        result = _train("--validate", sets=[f"train.out_dir={out_dir}"])
        assert result.exit_code == 1 and f"config key 'train.out_dir': {out_dir}" in result.output and message in result.output


def test_a_run_that_trains_into_nan_exits_1_naming_the_steps_and_exports_nothing(tmp_path):
    # A finite but absurd learning rate: the first update throws the weights to ~1e30, and every
    # later step's loss is inf or nan.
    result = _train(sets=[*SMALL, "optim.lr=1e30", f"train.out_dir={tmp_path}"])
    assert result.exit_code == 1, result.output
    assert "error: steps 2, 3, 4 had a non-finite loss or gradient norm" in result.output
    assert "train.max_nonfinite_steps = 3" in result.output
    assert not (tmp_path / "export").exists()


def test_a_model_option_error_keeps_its_closing_quote():
    """The message was cut as ``got 'flashy`` (quotes stripped from the ends, as if it were a KeyError's)."""
    from vfm_cli import recipe
    from vfm_parallel.trainer.config import ConfigError, from_dict

    cfg = from_dict({"model": {"family": "dit", "options": {"attention_backend": "flashy"}},
                     "data": {"source": "synthetic"}}, 1)
    with pytest.raises(ConfigError) as info:
        recipe.validate(cfg, 1, require_data=False)
    assert str(info.value).endswith("got 'flashy'"), str(info.value)
    assert info.value.key == "model.options"


@pytest.mark.parametrize("key, message", [
    ("model.tokenizer_options.pach=2", "config key 'model.tokenizer_options.pach': unknown option of tokenizer 'pixel'; "
                                       "accepted: patch, channels"),
    ("model.formulation_options.sigma_mn=0.1", "config key 'model.formulation_options.sigma_mn': unknown option of "
                                               "formulation 'edm'"),
])
def test_a_misspelt_plugin_option_is_refused_by_validate(key, message):
    """A tokenizer option typo passed --validate and went into the run's export."""
    result = _train("--validate", sets=[key])
    assert result.exit_code == 1, result.output
    assert message in result.output
