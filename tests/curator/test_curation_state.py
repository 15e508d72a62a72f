"""Incremental state of curation and sharding: the clip table is the union of every run into a
folder, failed videos run again when their cause may be gone, and an energon index that does not
match the shards on disk is rebuilt."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import vfm_curator
from vfm_curator.pipelines.shard_index import disk_counts, indexed_counts
from vfm_curator.synth import make_video

SERIAL = {"run": {"runner": "serial"}}
SHARD = {"tokenizer": "pixel", "text_encoder": "hash", "resolutions": [[32, 48]], "frames": [9], "max_shard_bytes": 400_000}


def _sources(out: Path) -> list[str]:
    return sorted({Path(r["source"]).name for r in pq.read_table(out / "clips.parquet").to_pylist()})


def _failures(out: Path) -> dict[str, dict]:
    return {Path(f["source"]).name: f for f in map(json.loads, (out / "failures.jsonl").read_text().splitlines())}


def _curate_nothing(*args, **kwargs) -> vfm_curator.Summary:
    """The summary of a run after which the folder still holds no clip (curate raises then)."""
    with pytest.raises(vfm_curator.NothingWrittenError, match="no clip written") as caught:
        vfm_curator.curate(*args, **kwargs)
    return caught.value.summary


def test_a_second_run_into_a_folder_keeps_the_first_runs_clips_in_the_table(tmp_path):
    make_video(tmp_path / "a.mp4", [30], seed=1)
    make_video(tmp_path / "b.mp4", [30], seed=2)
    out = tmp_path / "out"
    first = vfm_curator.curate(tmp_path / "a.mp4", out, SERIAL)
    second = vfm_curator.curate(tmp_path / "b.mp4", out, SERIAL)
    assert (first.clips, second.processed, second.clips) == (1, 1, 2)
    assert _sources(out) == ["a.mp4", "b.mp4"]
    rows = pq.read_table(out / "clips.parquet").to_pylist()
    assert {r["path"] for r in rows} == {f"clips/{p.name}" for p in (out / "clips").glob("*.mp4")}
    assert json.loads((out / "summary.json").read_text())["clips"] == 2


def test_a_video_failed_by_an_option_runs_again_once_the_option_is_changed(tmp_path):
    make_video(tmp_path / "in" / "short.mp4", [12], seed=1)  # 0.5 s
    make_video(tmp_path / "in" / "long.mp4", [30], seed=2)
    out = tmp_path / "out"
    strict = {**SERIAL, "options": {"split": {"min_clip_s": 1.0}}}
    vfm_curator.curate(tmp_path / "in", out, strict)
    failure = _failures(out)["short.mp4"]
    assert (failure["cause"], failure["kind"], failure["stage"]) == ("config", "too-short", "split")
    again = vfm_curator.curate(tmp_path / "in", out, strict)  # same options: the same failure, not redone
    assert (again.processed, again.skipped, again.retried) == (0, 2, 0)
    fixed = vfm_curator.curate(tmp_path / "in", out, {**SERIAL, "options": {"split": {"min_clip_s": 0.25}}})
    assert (fixed.processed, fixed.retried, fixed.failures) == (1, 1, 0)
    assert _sources(out) == ["long.mp4", "short.mp4"]
    assert (out / "failures.jsonl").read_text() == ""


def test_retry_failed_reruns_the_named_reason_only(tmp_path):
    make_video(tmp_path / "in" / "short.mp4", [12], seed=1)
    (tmp_path / "in" / "broken.mp4").write_bytes(b"\x00" * 64)
    out = tmp_path / "out"
    strict = {**SERIAL, "options": {"split": {"min_clip_s": 1.0}}}
    _curate_nothing(tmp_path / "in", out, strict)  # both fail, each run: no clip
    assert {n: f["cause"] for n, f in _failures(out).items()} == {"short.mp4": "config", "broken.mp4": "input"}
    assert _curate_nothing(tmp_path / "in", out, strict).processed == 0
    by_cause = _curate_nothing(tmp_path / "in", out, strict, retry_failed="input")
    assert (by_cause.processed, by_cause.retried) == (1, 1)
    by_kind = _curate_nothing(tmp_path / "in", out, strict, retry_failed="too-short")
    assert by_kind.processed == 1
    assert _curate_nothing(tmp_path / "in", out, strict, retry_failed="all").processed == 2
    with pytest.raises(ValueError, match=r"--retry-failed 'oom': unknown reason; accepted: all, input, config, machine"):
        vfm_curator.curate(tmp_path / "in", out, strict, retry_failed="oom")


def test_a_timed_out_stage_is_retried_up_to_max_attempts_and_again_by_a_later_run(tmp_path, ray_session):
    make_video(tmp_path / "v.mp4", [30], seed=1)
    out = tmp_path / "out"
    # every stage call takes longer than 1 ms: each attempt times out (cause: machine)
    tight = {"run": {"runner": "ray", "stage_timeout_s": 0.001, "max_attempts": 2}}
    first = _curate_nothing(tmp_path / "v.mp4", out, tight)
    failure = _failures(out)["v.mp4"]
    assert (failure["cause"], failure["kind"], failure["attempts"]) == ("machine", "timeout", 2)
    assert (first.processed, first.failures) == (1, 1)
    assert _curate_nothing(tmp_path / "v.mp4", out, tight).processed == 0  # 2 attempts of 2: failed for good
    later = vfm_curator.curate(tmp_path / "v.mp4", out, {"run": {"runner": "ray"}})  # max_attempts 3: one more try
    assert (later.processed, later.retried, later.failures, later.clips) == (1, 1, 0, 1)


@pytest.fixture()
def clips(tmp_path) -> Path:
    make_video(tmp_path / "in" / "a.mp4", [12, 12, 12], width=48, height=32, seed=3)
    (tmp_path / "in" / "a.txt").write_text("three short shots")
    out = tmp_path / "clips"
    vfm_curator.curate(tmp_path / "in" / "a.mp4", out, {**SERIAL, "options": {"split": {"min_clip_s": 0.4},
                                                                             "stitch": {"threshold": 1.0}}})
    return out


def _energon_rows(bucket: Path) -> int:
    with sqlite3.connect(bucket / ".nv-meta" / "index.sqlite") as db:
        return db.execute("select count(*) from samples").fetchone()[0]


def test_a_stale_energon_index_left_by_a_kill_before_prepare_is_rebuilt(clips, tmp_path):
    out = tmp_path / "shards"
    vfm_curator.shard(clips, out, SERIAL, **SHARD)
    bucket = out / "32x48x9"
    old_index = tmp_path / "old-nv-meta"
    shutil.copytree(bucket / ".nv-meta", old_index)
    make_video(tmp_path / "in2" / "b.mp4", [12, 12], width=48, height=32, seed=4)
    (tmp_path / "in2" / "b.txt").write_text("two more shots")
    vfm_curator.curate(tmp_path / "in2", clips, {**SERIAL, "options": {"split": {"min_clip_s": 0.4},
                                                                       "stitch": {"threshold": 1.0}}})
    grown = vfm_curator.shard(clips, out, SERIAL, **SHARD)
    assert grown.written == 2 and grown.samples == 5
    # a kill between the last shard's rename and prepare_dataset: new shards, the old index
    shutil.rmtree(bucket / ".nv-meta")
    shutil.copytree(old_index, bucket / ".nv-meta")
    assert _energon_rows(bucket) == 3 and indexed_counts(bucket) != disk_counts(bucket)
    rerun = vfm_curator.shard(clips, out, SERIAL, **SHARD)
    assert (rerun.written, rerun.reindexed, rerun.samples) == (0, ["32x48x9"], 5)
    assert _energon_rows(bucket) == 5 and indexed_counts(bucket) == disk_counts(bucket)
    # a kill inside prepare_dataset: a half-written index (its summary file never written)
    (bucket / ".nv-meta" / ".info.json").unlink()
    assert vfm_curator.shard(clips, out, SERIAL, **SHARD).reindexed == ["32x48x9"]
    assert _energon_rows(bucket) == 5
    assert vfm_curator.shard(clips, out, SERIAL, **SHARD).reindexed == []  # a current index is left alone


def test_shard_failures_are_kept_and_retried_when_the_clip_or_the_option_changes(clips, tmp_path):
    import pyarrow as pa

    table = pq.read_table(clips / "clips.parquet")
    rows = table.to_pylist()
    rows[0]["caption"] = None  # one clip lost its caption
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), clips / "clips.parquet")
    out = tmp_path / "shards"
    first = vfm_curator.shard(clips, out, SERIAL, **SHARD)
    assert (first.written, first.failures) == (2, 1)
    line = json.loads((out / "failures.jsonl").read_text())
    assert (line["kind"], line["cause"], line["id"]) == ("no-caption", "config", rows[0]["id"])
    again = vfm_curator.shard(clips, out, SERIAL, **SHARD)
    assert (again.processed, again.failed_before, again.failures) == (0, 1, 1)
    relaxed = vfm_curator.shard(clips, out, SERIAL, **{**SHARD, "require_captions": False})
    assert (relaxed.retried, relaxed.written, relaxed.failures, relaxed.samples) == (1, 1, 0, 3)
    assert (out / "failures.jsonl").read_text() == ""
