"""``vfm curate`` and ``vfm shard`` refuse an output folder that holds the other's output: both write
summary.json and failures.jsonl there (``vfm shard out -o out`` overwrote the curate run's list of
failed videos); the folder is left as it was."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import vfm_curator
from vfm_cli.main import app
from vfm_curator.synth import make_video


def test_shard_into_a_curate_folder_and_curate_into_a_shard_folder_are_refused(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    (tmp_path / "in" / "broken.mp4").write_bytes(b"not a video")
    clips = tmp_path / "clips"
    assert vfm_curator.curate(tmp_path / "in", clips, {"run": {"runner": "serial"}}).failures == 1
    before = {p.name: p.read_bytes() for p in clips.iterdir() if p.is_file()}
    shard_args = ["shard", str(clips), "--tokenizer", "pixel", "--text-encoder", "hash", "--runner", "serial",
                  "--no-require-captions", "--no-progress"]
    result = CliRunner().invoke(app, [*shard_args, "-o", str(clips)])  # the same folder for both
    assert result.exit_code == 1, result.output
    assert result.output.strip() == (f"error: -o {clips} is the output folder of `vfm curate` (it holds clips.parquet), "
                                     "which this run would overwrite; accepted: a new folder, or one that `vfm shard` wrote")
    assert {p.name: p.read_bytes() for p in clips.iterdir() if p.is_file()} == before  # failures.jsonl kept
    shards = tmp_path / "shards"
    assert CliRunner().invoke(app, [*shard_args, "-o", str(shards)]).exit_code == 0
    with pytest.raises(ValueError, match=r"is the output folder of `vfm shard` \(it holds shard_config.json\)"):
        vfm_curator.curate(tmp_path / "in", shards, {"run": {"runner": "serial"}})
    # each may run again into its own folder
    assert vfm_curator.curate(tmp_path / "in", clips, {"run": {"runner": "serial"}}).skipped == 2
    assert CliRunner().invoke(app, [*shard_args, "-o", str(shards)]).exit_code == 0
