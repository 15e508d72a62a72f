"""The inference export that ends a run cannot be written (its path taken, a full disk): one
``error:`` line saying so and that the step's checkpoint is complete, exit 1, and the same command
run again writes the export without training (it was a raw traceback)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_parallel import checkpoint as ckpt

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SMALL = ["train.steps=2", "optim.warmup_steps=1", "checkpoint.export=true", "logging.tensorboard=false",
         "logging.progress=false", "logging.loss_curve=false", "logging.peak_tflops=1.0", "data.num_samples=16",
         "model.options.hidden=16", "model.options.num_heads=2", "model.options.depth=1"]


def _train(out: Path):
    items = [*SMALL, f"train.out_dir={out}"]
    return CliRunner().invoke(app, ["train", str(CONFIGS / "tiny.toml"), *[a for s in items for a in ("--set", s)]])


def test_an_export_that_cannot_be_written_is_one_error_line_and_the_same_command_writes_it(tmp_path):
    (tmp_path / "export").write_text("not a folder")  # a real OSError from the export's mkdir
    failed = _train(tmp_path)
    assert failed.exit_code == 1, failed.output
    errors = [line for line in failed.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in failed.output, failed.output
    assert f"writing the inference export {tmp_path / 'export'} failed" in errors[0]
    assert "the checkpoint of step 2 is complete" in errors[0] and "run the same command again" in errors[0]
    assert ckpt.verify(tmp_path / "checkpoints" / "step_00000002")["step"] == 2

    (tmp_path / "export").unlink()
    again = _train(tmp_path)
    assert again.exit_code == 0, again.output
    assert "nothing to train" in again.output
    assert (tmp_path / "export" / "model.safetensors").is_file() and (tmp_path / "export" / "config.json").is_file()
