"""``vfm eval``: scores a folder of generated videos against the prompts file, writes scores.json."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from vfm_cli.main import app


def _videos(folder):
    from vfm_curator.synth import shape_frames
    from vfm_infer.video.mp4 import write_mp4

    for i, (colour, direction) in enumerate([("red", "right"), ("green", "up")]):
        frames = shape_frames(32, shape="circle", colour=colour, direction=direction, background=(120, 40, 160),
                              width=32, height=32, size=12)
        write_mp4(folder / f"{i:04d}.mp4", np.stack(frames[::4]))
    prompts = folder / "prompts.txt"
    prompts.write_text("a red circle moving right\n# a comment\na green circle moving left\n")
    return prompts


def test_eval_prints_and_writes_the_scores(tmp_path):
    prompts = _videos(tmp_path)
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--prompts", str(prompts), "--option", "shapes.flat_rms=12"])
    assert result.exit_code == 0, result.output
    scores = json.loads((tmp_path / "scores.json").read_text())["shapes"]
    assert scores["summary"]["colour_correct"] == 2 and scores["summary"]["motion_correct"] == 1
    assert [r["direction"] for r in scores["per_video"]] == ["right", "up"]
    assert "colour_correct" in result.output


def test_eval_errors_name_what_is_wrong(tmp_path):
    prompts = _videos(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["eval", str(tmp_path), "--prompts", str(prompts), "--metric", "nope"])
    assert result.exit_code == 1 and "available: " in result.output
    result = runner.invoke(app, ["eval", str(tmp_path), "--prompts", str(prompts), "--option", "clip.weights=x"])
    assert result.exit_code != 0 and "not among --metric" in result.output
    (tmp_path / "more.txt").write_text("a\nb\nc\n")
    result = runner.invoke(app, ["eval", str(tmp_path), "--prompts", str(tmp_path / "more.txt")])
    assert result.exit_code == 1 and "0002.mp4" in result.output


def test_eval_says_why_a_prompt_that_is_not_a_demo_caption_is_not_scored(tmp_path):
    _videos(tmp_path)
    prompts = tmp_path / "other.txt"
    prompts.write_text("a fox in the snow\na red circle moving right\n")
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--prompts", str(prompts)])
    assert result.exit_code == 0, result.output
    assert "note: shapes: 1 of 2 prompts are not demo captions" in result.output
    assert "not demo captions" in json.loads((tmp_path / "scores.json").read_text())["shapes"]["notes"][0]


def test_eval_table_piped_shows_every_column_name_and_value_whole(tmp_path):
    prompts = _videos(tmp_path)
    # COLUMNS=80: what rich assumes when the output is a file or a CI log; it cut "background_rms" to "backg…"
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--prompts", str(prompts), "--option", "shapes.flat_rms=12"],
                                env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    header = next(line for line in result.output.splitlines() if "background_rms" in line)
    for column in ("prompt", "colour_ok", "direction_ok", "single_shape"):
        assert column in header
    scores = json.loads((tmp_path / "scores.json").read_text())["shapes"]["per_video"]
    for row in scores:  # each video's row is one line holding its prompt and figures as scores.json has them
        line = next(line for line in result.output.splitlines() if row["prompt"] in line)
        assert f"{row['background_rms']:g}" in line and row["direction"] in line


def test_a_file_that_is_not_a_video_is_one_line_naming_it(tmp_path):
    prompts = _videos(tmp_path)
    (tmp_path / "0001.mp4").write_text("not a video\n")
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--prompts", str(prompts)])
    assert result.exit_code == 1, result.output
    line = result.output.strip().splitlines()[-1]
    assert line.startswith(f"error: {tmp_path / '0001.mp4'} is not a video PyAV can decode ("), line
    assert "Errno" not in line and "Traceback" not in result.output


def test_a_videos_folder_that_does_not_exist_is_named_as_such(tmp_path):
    prompts = _videos(tmp_path)
    result = CliRunner().invoke(app, ["eval", str(tmp_path / "nope"), "--prompts", str(prompts)])
    assert result.exit_code == 1
    assert f"error: the videos folder {tmp_path / 'nope'} does not exist" in result.output, result.output


def test_videos_beyond_the_prompts_file_are_named_as_not_scored(tmp_path):
    # three videos and a prompts file of two: the third was scored against nothing, silently
    _videos(tmp_path)
    (tmp_path / "0002.mp4").write_bytes((tmp_path / "0000.mp4").read_bytes())
    (tmp_path / "two.txt").write_text("a red circle moving right\na green circle moving up\n")
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--prompts", str(tmp_path / "two.txt")])
    assert result.exit_code == 0, result.output
    assert ("note: 1 video has no line in the prompts file (2 prompts), not scored: 0002.mp4; is it the file given to "
            "vfm generate?") in " ".join(result.output.split()), result.output
    (tmp_path / "0002.mp4").unlink()
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--prompts", str(tmp_path / "two.txt")])
    assert "no line in the prompts file" not in result.output


def test_an_out_path_that_is_a_folder_is_refused_before_any_video_is_scored(tmp_path):
    prompts = _videos(tmp_path)
    (tmp_path / "scores").mkdir()
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--prompts", str(prompts), "-o", str(tmp_path / "scores")])
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {tmp_path / 'scores'} is a folder; name a file for the scores with -o", result.output
