"""``vfm export SRC`` where SRC is none of what it takes (an export, a run with export/, a checkpoint):
one line that says what SRC is instead (missing, a run with no checkpoint yet, a diffusers model folder)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from vfm_cli.main import app


def _export(src, tmp_path):
    return CliRunner().invoke(app, ["export", str(src), "--format", "vfm", "-o", str(tmp_path / "out")])


def test_a_source_that_does_not_exist_is_named_as_missing(tmp_path):
    result = _export(tmp_path / "runs" / "nope", tmp_path)
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {tmp_path / 'runs' / 'nope'} does not exist"


def test_a_run_with_no_checkpoint_yet_says_so_and_when_one_is_written(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "loss": 1.0}) + "\n")
    result = _export(run, tmp_path)
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert f"error: {run} is a training run with no checkpoint yet and no export/" in text, text
    assert "checkpoint.interval" in text


def test_a_diffusers_model_folder_points_at_vfm_convert(tmp_path):
    folder = tmp_path / "dit"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"_class_name": "DiTTransformer2DModel", "num_layers": 2}))
    (folder / "diffusion_pytorch_model.safetensors").write_bytes(b"")
    result = _export(folder, tmp_path)
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert f"error: {folder} is a diffusers model folder (DiTTransformer2DModel), not a vfm export: vfm convert" in text, text
