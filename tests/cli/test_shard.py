"""``vfm shard``: shards curated clips, prints samples/tokens per bucket, bytes and throughput."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

import vfm_curator
from vfm_cli.main import app
from vfm_curator.synth import make_video


def test_shard_command_writes_buckets_and_prints_the_summary(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [20], width=48, height=32, seed=1)
    make_video(tmp_path / "in" / "b.mp4", [14], width=48, height=32, seed=2)
    (tmp_path / "in" / "a.txt").write_text("a caption")
    vfm_curator.curate(tmp_path / "in", tmp_path / "clips", {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.4}}})
    config = tmp_path / "s.toml"
    config.write_text('[shard]\nresolutions = [[32, 48]]\nframes = [9]\n[run]\nrunner = "serial"\n')
    out = tmp_path / "shards"
    args = ["shard", str(tmp_path / "clips"), "-o", str(out), "--tokenizer", "pixel", "--text-encoder", "hash",
            "--config", str(config), "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    # b has no caption; a's 20 frames hold 2 windows of 9: 2 samples
    assert summary["buckets"]["32x48x9"]["samples"] == 2 and summary["failures"] == 1
    tokens = 9 * 32 * 48
    assert re.search(rf"32x48x9\s+│\s+2\s+│\s+{2 * tokens}\s+│\s+1\s+│", result.output)
    assert re.search(r"throughput \(samples/s\)\s+│\s+\d+\.\d\d", result.output)
    assert "failures.jsonl" in result.output and (out / "blend.yaml").is_file()
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and re.search(r"skipped \(sharded before\)\s+│\s+1", again.output)


def test_shard_command_needs_a_tokenizer_and_reports_bad_names(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["shard", str(tmp_path), "-o", str(tmp_path / "o"), "--text-encoder", "hash"])
    assert result.exit_code != 0 and "--tokenizer" in result.output
    result = runner.invoke(app, ["shard", str(tmp_path), "-o", str(tmp_path / "o"), "--tokenizer", "nope", "--text-encoder", "hash"])
    assert result.exit_code == 1 and "nope" in result.output and "pixel" in result.output


def test_shard_help_shows_the_config_sections_in_brackets():
    # rich markup reads an unescaped "[shard]" as a style tag and drops it: "(, , ...)"
    result = CliRunner().invoke(app, ["shard", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "[shard], [run]" in result.output
