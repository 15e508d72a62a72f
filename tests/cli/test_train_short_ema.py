"""A short run with an EMA of decay 0.999 (~1000 steps of memory) and no warm-up (ema.warmup = false) exports
weights that are still mostly the random initialisation: `vfm generate` then draws noise from a run whose loss
fell. `vfm train` says so before it starts, with the decay that fits the run. With the warm-up (the default) the
first updates forget the start whatever the decay, and nothing is said."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from vfm_cli.main import app

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.toml"


def _validate(tmp_path, *sets):
    args = ["train", str(TINY), "--validate", "--set", f"train.out_dir={tmp_path / 'run'}"]
    for item in sets:
        args += ["--set", item]
    return CliRunner().invoke(app, args)


def test_a_run_shorter_than_its_ema_horizon_without_warmup_is_told_its_export_would_keep_the_initial_weights(tmp_path):
    result = _validate(tmp_path, "train.steps=400", "ema.decay=0.999", "ema.warmup=false")
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.output.splitlines() if "ema.decay" in ln]
    assert len(lines) == 1, result.output
    line = lines[0]
    assert line.startswith("warning: ema.decay 0.999"), line
    assert "train.steps 400" in line and "67%" in line and "initial" in line, line
    assert "ema.decay = 0.9925" in line and "ema.warmup = true" in line and "ema.enabled = false" in line, line


def test_a_run_long_enough_for_its_ema_or_without_one_is_not_warned(tmp_path):
    for sets in ((), ("train.steps=400", "ema.decay=0.98", "ema.warmup=false"), ("train.steps=400", "ema.enabled=false"),
                 ("train.steps=400", "ema.warmup=false", "checkpoint.export=false")):
        result = _validate(tmp_path, *sets)
        assert result.exit_code == 0, result.output
        assert "ema.decay" not in result.output, (sets, result.output)


def test_a_short_run_with_the_ema_warmup_is_not_warned_however_close_to_1_its_decay(tmp_path):
    # 400 steps at 0.99999 keep 1 / C(409, 9) of the start (1e-18) with the warm-up; 99.6% without it
    for sets in (("train.steps=400",), ("train.steps=400", "ema.decay=0.99999"), ("train.steps=20", "ema.decay=0.99999")):
        result = _validate(tmp_path, *sets)
        assert result.exit_code == 0, result.output
        assert "ema.decay" not in result.output, (sets, result.output)
