"""``vfm train`` run again on a finished run's folder (often meant as a new run): it says there is
nothing to train and how to continue or start anew, and prints no tokens/s or MFU of zero steps."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from vfm_cli.main import app

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SMALL = ["train.steps=2", "optim.warmup_steps=1", "checkpoint.export=false", "logging.tensorboard=false",
         "logging.progress=false", "logging.loss_curve=false", "logging.peak_tflops=1.0", "data.num_samples=16",
         "model.options.hidden=16", "model.options.num_heads=2", "model.options.depth=1"]


def _train(out: Path, *items: str):
    args = [arg for item in (*SMALL, f"train.out_dir={out}", *items) for arg in ("--set", item)]
    return CliRunner().invoke(app, ["train", str(CONFIGS / "tiny.toml"), *args])


def test_a_finished_run_run_again_says_nothing_to_train_and_prints_no_zero_figures(tmp_path):
    first = _train(tmp_path)
    assert first.exit_code == 0 and "tokens/s " in first.output, first.output
    again = _train(tmp_path, "optim.lr=1e-3")
    assert again.exit_code == 0, again.output
    assert "changed since checkpoint step_00000002: optim.lr 0.002 -> 0.001" in again.output
    assert ("nothing to train: the checkpoint is at step 2 and the run ends at train.steps = 2; raise train.steps to "
            "continue it, or give a new run its own train.out_dir") in again.output
    assert "tokens/s 0.0" not in again.output and "MFU 0.000%" not in again.output


def test_a_diverging_run_warns_in_warning_lines_and_stops_naming_the_last_good_checkpoint(tmp_path):
    # lr 1e30: the first update blows the weights up, every later loss is not finite
    result = _train(tmp_path, "optim.lr=1e30", "train.steps=8", "checkpoint.interval=1", "logging.interval=1")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    warnings = [line for line in lines if line.startswith("warning: step ")]
    assert warnings and all("skipped: non-finite loss" in line for line in warnings), result.output
    assert "RuntimeWarning" not in result.output and "TrainingWarning" not in result.output
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1
    assert errors[0].endswith(f"The newest checkpoint, of the last finite step saved: {tmp_path / 'checkpoints' / 'step_00000001'}")


def test_validate_checks_the_checkpoint_the_run_would_resume_from(tmp_path):
    assert _train(tmp_path).exit_code == 0
    args = lambda *items: ["train", str(CONFIGS / "tiny.toml"), "--validate",  # noqa: E731
                           *[arg for item in (*SMALL, f"train.out_dir={tmp_path}", *items) for arg in ("--set", item)]]
    checkpoint = tmp_path / "checkpoints" / "step_00000002"
    ok = CliRunner().invoke(app, args("train.steps=4", "optim.lr=1e-3"))
    assert ok.exit_code == 0, ok.output
    assert f"valid; resumes from step 2 ({checkpoint})" in ok.output
    assert "changed since checkpoint step_00000002: optim.lr 0.002 -> 0.001; train.steps 2 -> 4" in ok.output
    refused = CliRunner().invoke(app, args("train.steps=4", "data.micro_batch=4"))
    assert refused.exit_code == 1
    assert ": valid" not in refused.output
    errors = [line for line in refused.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and 'data.micro_batch 8 -> 4 ("batch")' in errors[0]
