"""``vfm eval`` run for one metric keeps the scores of the other metrics already in ``scores.json`` (the demo's
``shapes``, an FVD that took hours) when no scored video changed since they were written; it replaced the file
whole, without a word."""

from __future__ import annotations

import json
import os

from typer.testing import CliRunner

from tests.infer.metric_models import tiny_i3d_weights, write_videos
from vfm_cli.main import app


def _setup(tmp_path):
    videos = tmp_path / "videos"
    write_videos(videos, [1, 2], frames=16)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a red square moving right\na blue circle moving left\n")
    reference = tmp_path / "real"
    write_videos(reference, [7, 8, 9], frames=16)
    fvd = ["--metric", "fvd", "--option", f"fvd.reference={reference}",
           "--option", f"fvd.weights={tiny_i3d_weights(tmp_path / 'i3d.safetensors')}", "--option", "fvd.size=64",
           "--option", f"fvd.cache_dir={tmp_path / 'cache'}"]
    return videos, prompts, fvd


def _eval(videos, prompts, *args):
    result = CliRunner().invoke(app, ["eval", str(videos), "--prompts", str(prompts), *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result, json.loads((videos / "scores.json").read_text())


def test_a_second_metric_keeps_the_first_metrics_scores_in_scores_json(tmp_path):
    videos, prompts, fvd = _setup(tmp_path)
    _, first = _eval(videos, prompts)  # shapes, the default
    result, both = _eval(videos, prompts, *fvd)
    assert set(both) == {"shapes", "fvd"}
    assert both["shapes"] == first["shapes"]
    assert f"note: {videos / 'scores.json'} keeps the earlier scores of shapes" in " ".join(result.output.split())
    _, again = _eval(videos, prompts)  # shapes again: fvd stays, shapes is this run's
    assert set(again) == {"shapes", "fvd"} and again["fvd"] == both["fvd"]


def test_earlier_scores_of_videos_changed_since_are_dropped_and_named(tmp_path):
    videos, prompts, fvd = _setup(tmp_path)
    _eval(videos, prompts)
    later = (videos / "scores.json").stat().st_mtime_ns + 1_000_000_000
    os.utime(videos / "0001.mp4", ns=(later, later))  # regenerated after the shapes scores were written
    result, scores = _eval(videos, prompts, *fvd)
    assert set(scores) == {"fvd"}
    text = " ".join(result.output.split())
    assert "note: dropped the earlier scores of shapes" in text and "0001.mp4 changed after they were written" in text


def test_a_scores_json_nested_too_deep_is_replaced_not_a_traceback(tmp_path):
    """A ``scores.json`` from elsewhere nested deeper than Python's JSON reader follows raised RecursionError
    (not a ValueError) out of the merge of earlier scores; it is replaced, as a file that does not parse is."""
    videos, prompts, _ = _setup(tmp_path)
    (videos / "scores.json").write_text("[" * 100_000 + "]" * 100_000)
    _, scores = _eval(videos, prompts)
    assert set(scores) == {"shapes"}
