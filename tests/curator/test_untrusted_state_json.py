"""A run folder from elsewhere resumed (``vfm curate IN OUT`` on someone's OUT): its state records and
moved markers are JSON vfm reads as data. One nested deeper than Python's JSON reader follows is read
as a broken record (as an edited one), never a ``RecursionError`` traceback that stops the run. Real
H264 inputs (PyAV), real runs."""

from __future__ import annotations

import os

import pytest

import vfm_curator
from tests.curator.moved_folder import SERIAL
from vfm_curator.synth import make_video

DEEP = "[" * 100_000 + "]" * 100_000


def test_a_state_record_or_moved_marker_nested_too_deep_is_read_as_broken_and_the_run_goes_on(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [24], seed=2)
    out = tmp_path / "out"
    first = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert first.processed == 2 and first.failures == 0
    records = sorted((out / ".state" / "videos").glob("*.json"))
    records[0].write_text(DEEP)
    (out / ".state" / "moved").mkdir(exist_ok=True)
    (out / ".state" / "moved" / "0123456789abcdef").write_text(DEEP)
    again = vfm_curator.curate(tmp_path / "in", out, SERIAL)  # a RecursionError traceback before
    assert again.videos == 2 and again.skipped >= 1  # the intact record's video is not clipped again


@pytest.mark.timeout(120)
def test_a_state_record_or_moved_marker_that_is_a_named_pipe_is_read_as_none_and_the_run_goes_on(tmp_path):
    """Reading either opened the pipe and waited for a writer forever: the resume hung before any work."""
    make_video(tmp_path / "in" / "a.mp4", [24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [24], seed=2)
    out = tmp_path / "out"
    vfm_curator.curate(tmp_path / "in", out, SERIAL)
    record = sorted((out / ".state" / "videos").glob("*.json"))[0]
    record.unlink()
    os.mkfifo(record)
    (out / ".state" / "moved").mkdir(exist_ok=True)
    os.mkfifo(out / ".state" / "moved" / "0123456789abcdef")
    again = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert again.videos == 2 and again.skipped >= 1


@pytest.mark.timeout(120)
def test_a_shard_config_json_that_is_a_named_pipe_is_read_as_missing_and_vfm_shard_goes_on(tmp_path):
    """_check_identity opened it by path and waited for a writer forever: the resumed vfm shard hung."""
    make_video(tmp_path / "in" / "a.mp4", [24], seed=1)
    out, shards = tmp_path / "out", tmp_path / "shards"
    vfm_curator.curate(tmp_path / "in", out, SERIAL)
    shard = {"tokenizer": "pixel", "text_encoder": "hash", "require_captions": False}
    vfm_curator.shard(out, shards, SERIAL, **shard)
    config = shards / "shard_config.json"
    config.unlink()
    os.mkfifo(config)
    again = vfm_curator.shard(out, shards, SERIAL, **shard)
    assert again.skipped == again.clips > 0  # resumed as the same folder
    assert config.is_file()  # the pipe replaced by this run's settings
