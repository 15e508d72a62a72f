"""``vfm train`` resuming: a damaged or mismatched checkpoint is one line on stderr and exit 1, a
fallback is a warning line, and the resume is announced."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from vfm_cli.main import app

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SMALL = ["train.steps=4", "optim.warmup_steps=1", "checkpoint.interval=2", "checkpoint.export=false",
         "logging.tensorboard=false", "logging.progress=false", "logging.loss_curve=false", "logging.peak_tflops=1.0",
         "data.num_samples=16", "model.options.hidden=16", "model.options.num_heads=2", "model.options.depth=1"]


def _train(out: Path, *items: str):
    args = [arg for item in (*SMALL, f"train.out_dir={out}", *items) for arg in ("--set", item)]
    return CliRunner().invoke(app, ["train", str(CONFIGS / "tiny.toml"), *args])


def test_vfm_train_refuses_a_damaged_or_mismatched_checkpoint_in_one_line_and_falls_back_on_auto(tmp_path):
    assert _train(tmp_path, "train.stop_at=4").exit_code == 0
    step4 = tmp_path / "checkpoints" / "step_00000004"
    state = step4 / "state.json"
    state.write_text(state.read_text().replace('"step": 4', '"step": 40'))

    named = _train(tmp_path, f"checkpoint.resume={step4}")
    assert named.exit_code == 1
    errors = [line for line in named.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(step4) in errors[0] and "state.json" in errors[0]
    assert "Traceback" not in named.output

    seed = _train(tmp_path, "train.seed=99")  # falls back to step 2, whose seed differs
    assert seed.exit_code == 1
    assert "warning:" in seed.output and "step_00000002" in seed.output
    assert "error:" in seed.output and "train.seed" in seed.output and "checkpoint.allow_changes" in seed.output

    resumed = _train(tmp_path)
    assert resumed.exit_code == 0, resumed.output
    assert f"resuming from step 2 ({tmp_path / 'checkpoints' / 'step_00000002'})" in resumed.output
