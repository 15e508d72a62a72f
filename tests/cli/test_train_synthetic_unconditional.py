"""An unconditional model trained on the synthetic blobs is given no labels: the blobs' class labels are
for class-conditional models, and an unconditional one would warn once that it ignores them."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from vfm_cli.main import app

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["train.steps=2", "optim.warmup_steps=1", "checkpoint.interval=2", "logging.tensorboard=false",
         "logging.progress=false", "logging.loss_curve=false", "logging.peak_tflops=1.0", "data.num_samples=16",
         "model.options.hidden=32", "model.options.num_heads=2"]


def test_an_unconditional_model_on_synthetic_blobs_trains_without_an_ignored_labels_warning(tmp_path):
    sets = SMALL + [f"train.out_dir={tmp_path / 'run'}", "model.options.num_classes=0"]
    result = CliRunner().invoke(app, ["train", str(ROOT / "configs/tiny.toml"),
                                      *[arg for item in sets for arg in ("--set", item)]])
    assert result.exit_code == 0, result.output
    assert "ignored" not in result.output  # was: warning: cond key 'y' ignored: this model takes cond = None
    assert (tmp_path / "run" / "export").is_dir()
