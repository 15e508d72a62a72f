"""``vfm eval --metric clip-score --metric fvd``: the built-in CLIP score and FVD from local weights, through the
command line, on real H264 videos with tiny random-init models."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tests.infer.metric_models import tiny_clip_folder, tiny_i3d_weights, write_videos
from vfm_cli.main import app

pytest.importorskip("transformers")


def _videos(tmp_path):
    videos = tmp_path / "videos"
    write_videos(videos, [1, 2, 3])
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a red square moving right\na blue circle moving left\na fox in the snow\n")
    return videos, prompts


def test_plugins_lists_clip_score_and_fvd_with_their_options():
    result = CliRunner().invoke(app, ["plugins", "--kind", "metrics", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert {"shapes", "clip-score", "fvd"} <= set(rows)
    assert rows["clip-score"]["provider"] == "vfm-infer" and "model=PATH" in rows["clip-score"]["description"]
    assert "reference=DIR" in rows["fvd"]["description"] and "weights=" in rows["fvd"]["description"]


@pytest.mark.parametrize(("metric", "options", "line"), [
    ("clip-score", [], "error: metric 'clip-score' needs the option model: a local folder of a transformers CLIP or SigLIP "
                       "model (config.json, weights, tokenizer, preprocessor_config.json) (--option clip-score.model=PATH)"),
    ("fvd", ["--option", "fvd.weights=i3d.safetensors"], "error: metric 'fvd' needs the option reference: a folder of real "
                                                         "videos, any container PyAV reads (--option fvd.reference=DIR)"),
])
def test_a_missing_model_path_is_one_error_line_naming_the_option(tmp_path, metric, options, line):
    videos, prompts = _videos(tmp_path)
    (videos / "0000.mp4").write_text("not a video")  # the options are checked before any video is read
    result = CliRunner().invoke(app, ["eval", str(videos), "--prompts", str(prompts), "--metric", metric, *options])
    assert result.exit_code == 1
    assert result.output.strip() == line, result.output


def test_eval_scores_clip_score_and_fvd_and_writes_them(tmp_path):
    videos, prompts = _videos(tmp_path)
    model = tiny_clip_folder(tmp_path / "clip")
    weights = tiny_i3d_weights(tmp_path / "i3d.safetensors")
    reference = tmp_path / "real"
    write_videos(reference, [7, 8, 9, 10], frames=24, names=["r1.mp4", "r2.mkv", "r3.mp4", "r4.mp4"])
    args = ["eval", str(videos), "--prompts", str(prompts), "--metric", "clip-score", "--metric", "fvd",
            "--option", f"clip-score.model={model}", "--option", "clip-score.frames=4",
            "--option", f"fvd.reference={reference}", "--option", f"fvd.weights={weights}", "--option", "fvd.size=64",
            "--option", f"fvd.cache_dir={tmp_path / 'cache'}"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    scores = json.loads((videos / "scores.json").read_text())
    assert [row["frames"] for row in scores["clip-score"]["per_video"]] == [4, 4, 4]
    assert 0 <= scores["clip-score"]["summary"]["clip_score"] <= 100
    fvd = scores["fvd"]
    assert fvd["per_video"] == [] and fvd["summary"]["videos"] == 3 and fvd["summary"]["reference_videos"] == 4
    assert fvd["summary"]["fvd"] > 1
    assert any("at least 401 videos on each side" in note for note in fvd["notes"])
    text = " ".join(result.output.split())
    assert "note: fvd: FVD from 3 generated and 4 reference videos" in text
    assert "computed and cached" in text
    # again, as a process of its own (pytest would catch a Python warning): the reference statistics come from the
    # cache, and the small-sample caveat is one note, not also a "SmallSampleWarning" with a source line
    again = subprocess.run([sys.executable, "-m", "vfm_cli.main", *args], capture_output=True, text=True,
                           env={**os.environ, "COLUMNS": "200"}, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "read from the cache" in " ".join(again.stdout.split())
    assert "Warning" not in again.stderr and " ".join(again.stdout.split()).count("at least 401 videos") == 1, again.stderr
    assert json.loads((videos / "scores.json").read_text())["fvd"]["summary"]["fvd"] == pytest.approx(fvd["summary"]["fvd"])
