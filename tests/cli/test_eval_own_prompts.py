"""`vfm eval VIDEOS --prompts FILE` on a user's own prompts: the default metric, `shapes`, scores only
the demo's captions, so it scores none of them; the run says which metrics score their own prompts."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app


def _videos(folder, prompts):
    from vfm_curator.synth import make_video

    for i in range(len(prompts)):
        make_video(folder / f"{i:04d}.mp4", [8], width=48, height=32, seed=i)  # real H264 through PyAV
    (folder / "prompts.txt").write_text("".join(p + "\n" for p in prompts))


def test_shapes_scoring_none_of_the_users_prompts_names_the_metrics_that_would(tmp_path):
    _videos(tmp_path, ["a sunny beach with waves", "aerial view of green fields"])
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--prompts", str(tmp_path / "prompts.txt")])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "2 of 2 prompts are not demo captions" in text
    assert "--metric clip-score --option clip-score.model=DIR" in text and "--metric fvd" in text, text


def test_demo_captions_get_no_such_note(tmp_path):
    _videos(tmp_path, ["a red circle moving right"])
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--prompts", str(tmp_path / "prompts.txt")])
    assert result.exit_code == 0, result.output
    assert "clip-score" not in result.output


def test_the_note_goes_to_stderr_beside_the_other_notes_not_into_the_scores_output(tmp_path):
    _videos(tmp_path, ["a sunny beach with waves"])
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--prompts", str(tmp_path / "prompts.txt")])
    assert result.exit_code == 0, result.output
    assert "clip-score" not in result.stdout, result.stdout
    assert "--metric clip-score" in " ".join(result.stderr.split()), result.stderr


def test_no_note_when_a_metric_that_scores_own_prompts_is_asked_beside_shapes(tmp_path):
    pytest.importorskip("transformers")
    from tests.infer.metric_models import tiny_clip_folder

    _videos(tmp_path, ["a sunny beach with waves"])
    model = tiny_clip_folder(tmp_path / "clip")
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--prompts", str(tmp_path / "prompts.txt"), "--metric",
                                      "shapes", "--metric", "clip-score", "--option", f"clip-score.model={model}",
                                      "--option", "clip-score.frames=2"])
    assert result.exit_code == 0, result.output
    assert "to score videos against your own prompts" not in " ".join(result.output.split()), result.output


def test_the_rows_shapes_did_not_score_show_no_check_as_failed(tmp_path):
    _videos(tmp_path, ["a sunny beach with waves", "aerial view of green fields"])
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--prompts", str(tmp_path / "prompts.txt")],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("│") and ("sunny" in line or "fields" in line)]
    assert len(rows) == 2 and not any("NO" in row.split() for row in rows), result.stdout
