"""``vfm curate`` and ``vfm shard`` refuse bad options, folders and manifests with one line naming
the problem and what is accepted (exit 2 for a bad --config, 1 for the rest), surface energon's own
reasons, and rerun failed videos with --retry-failed."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

import vfm_curator
from vfm_cli.main import app
from vfm_curator.synth import make_video


def _flat(output: str) -> str:
    """Typer's error box as one line of words."""
    return " ".join(output.replace("│", " ").split())


def _error_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1, output  # one line, no traceback
    return lines[0]


@pytest.mark.parametrize("toml, message", [
    ('[run]\nrunner = "ray"\nworkers = {decode = 0}\n', "workers.decode = 0; accepted: an integer >= 1"),
    ('stages = ["decode", "splt", "write"]\n', "unknown stage(s) 'splt'; available:"),
    ("[options.transcode]\ncrf = 99\n", "crf = 99 is out of range; accepted: an integer in [0, 51]"),
])
def test_curate_refuses_a_bad_config_before_any_work(tmp_path, toml, message):
    make_video(tmp_path / "a.mp4", [12], seed=1)
    (tmp_path / "c.toml").write_text(toml)
    result = CliRunner().invoke(app, ["curate", str(tmp_path / "a.mp4"), "-o", str(tmp_path / "out"),
                                      "--config", str(tmp_path / "c.toml"), "--no-progress"])
    assert result.exit_code == 2 and message in _flat(result.output), result.output
    assert not (tmp_path / "out").exists()


def test_curate_errors_are_one_line_with_exit_code_1(tmp_path):
    make_video(tmp_path / "a.mp4", [12], seed=1)
    (tmp_path / "taken").write_text("x")
    (tmp_path / "m.jsonl").write_text('{"path": 3}\n')
    runner = CliRunner()
    cases = [
        (["curate", str(tmp_path / "a.mp4"), "-o", str(tmp_path / "taken")], "is a file; accepted: a folder"),
        (["curate", str(tmp_path / "m.jsonl"), "-o", str(tmp_path / "o")], "'path' is int 3; accepted: a string"),
        (["curate", str(tmp_path / "a.mp4"), "-o", str(tmp_path / "o"), "--retry-failed", "oom"],
         "unknown reason; accepted: all, input, config, machine"),
    ]
    for args, message in cases:
        result = runner.invoke(app, [*args, "--runner", "serial", "--no-progress"])
        assert result.exit_code == 1, result.output
        line = _error_line(result.output)
        assert line.startswith("error:") and message in line, line


def test_curate_retry_failed_reruns_the_failed_videos(tmp_path):
    make_video(tmp_path / "in" / "short.mp4", [12], seed=1)
    (tmp_path / "c.toml").write_text('[run]\nrunner = "serial"\n[options.split]\nmin_clip_s = 1.0\n')
    args = ["curate", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--config", str(tmp_path / "c.toml"), "--no-progress"]
    runner = CliRunner()
    assert runner.invoke(app, args).exit_code == 1  # no clip written: exit 1 (tests/cli/test_curate_outcome.py)
    assert runner.invoke(app, args).exit_code == 1  # the failure stays: same options, same file
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["processed"] == 0
    result = runner.invoke(app, [*args, "--retry-failed", "too-short"])
    assert result.exit_code == 1 and "error: no clip written: the video failed (too-short 1)" in result.output, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["processed"], summary["retried"], summary["failures"]) == (1, 1, 1)


def test_shard_refuses_a_file_as_output_and_surfaces_energons_reason(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [12, 12], width=48, height=32, seed=1)
    (tmp_path / "in" / "a.txt").write_text("a caption")
    vfm_curator.curate(tmp_path / "in", tmp_path / "clips", {"run": {"runner": "serial"},
                                                              "options": {"split": {"min_clip_s": 0.4}, "stitch": {"threshold": 1.0}}})
    (tmp_path / "taken").write_text("x")
    base = ["shard", str(tmp_path / "clips"), "--tokenizer", "pixel", "--text-encoder", "hash", "--runner", "serial", "--no-progress"]
    runner = CliRunner()
    result = runner.invoke(app, [*base, "-o", str(tmp_path / "taken")])
    assert result.exit_code == 1 and "is a file; accepted: a folder" in _error_line(result.output)
    out = tmp_path / "shards"
    (tmp_path / "s.toml").write_text("[shard]\nresolutions = [[32, 48]]\nframes = [9]\n")
    base += ["--config", str(tmp_path / "s.toml")]
    assert runner.invoke(app, [*base, "-o", str(out)]).exit_code == 0
    # a shard copied under a second name (what two unlocked writers left): every key twice
    bucket = out / "32x48x9"
    shutil.copy(bucket / "shard-000000.tar", bucket / "shard-000007.tar")
    result = runner.invoke(app, [*base, "-o", str(out)])
    assert result.exit_code == 1, result.output
    line = _error_line(" ".join(result.output.split()))
    assert f"energon could not index {bucket}" in line and "duplicate keys" in line, line
