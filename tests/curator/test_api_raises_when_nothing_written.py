"""``vfm_curator.curate`` and ``vfm_curator.shard`` raise ``NothingWrittenError`` where ``vfm curate`` /
``vfm shard`` exit 1 (every video or clip failed), naming how many failed, the commonest reasons and
failures.jsonl, instead of returning an empty summary; what the run recorded stays on disk and on the
error. Real H264 videos (PyAV), a real clipping and sharding run in process."""

from __future__ import annotations

import json

import pytest

import vfm_curator
from vfm_curator.errors import NothingWrittenError
from vfm_curator.synth import make_video

SERIAL = {"run": {"runner": "serial"}}


def test_curate_raises_when_every_video_failed_and_keeps_failures_jsonl(tmp_path):
    make_video(tmp_path / "in" / "short.mp4", [12], seed=1)  # 0.5 s, under min_clip_s
    (tmp_path / "in" / "broken.mp4").write_bytes(b"\x00" * 64)  # not a video
    out = tmp_path / "out"
    with pytest.raises(NothingWrittenError) as caught:
        vfm_curator.curate(tmp_path / "in", out, {**SERIAL, "options": {"split": {"min_clip_s": 1.0}}})
    error, failures = caught.value, out / "failures.jsonl"
    text = str(error)
    assert text.startswith("no clip written: all 2 videos failed (")
    assert "too-short 1" in text and "unusable-input 1" in text and "the most common reason: " in text
    assert "next most common: " in text  # the second kind, with its reason
    assert text.endswith(f"; see {failures}")
    assert isinstance(error, ValueError) and error.failures == failures
    assert {json.loads(line)["source"].rsplit("/", 1)[-1] for line in failures.read_text().splitlines()} == {
        "short.mp4", "broken.mp4"}
    assert (error.summary.clips, error.summary.failures, error.summary.processed) == (0, 2, 2)
    assert json.loads((out / "summary.json").read_text())["failures"] == 2


def test_shard_raises_when_every_clip_failed_and_keeps_failures_jsonl(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24], seed=1)  # one 24-frame clip
    assert vfm_curator.curate(tmp_path / "in", tmp_path / "clips", SERIAL).clips == 1
    shard = {**SERIAL, "shard": {"tokenizer": "pixel", "text_encoder": "hash", "resolutions": [[16, 16]], "frames": [16],
                                 "frame_stride": 2, "require_captions": False}}
    out = tmp_path / "shards"
    with pytest.raises(NothingWrittenError) as caught:
        vfm_curator.shard(tmp_path / "clips", out, shard)
    error, failures = caught.value, out / "failures.jsonl"
    assert str(error) == ("no sample written: 1 of 1 clips failed (too-short): too short: 12 frame(s) at stride 2; the "
                          f"shortest bucket takes 16 (frames = [16]); see {failures}")
    assert error.failures == failures and (error.summary.samples, error.summary.failures) == (0, 1)
    [record] = [json.loads(line) for line in failures.read_text().splitlines()]
    assert (record["kind"], record["cause"]) == ("too-short", "config")
    shard["shard"]["frames"] = [8]  # the same folder with a bucket the clip fills: a summary again
    assert vfm_curator.shard(tmp_path / "clips", out, shard).samples == 1


def test_the_error_names_the_commonest_kinds_in_order(tmp_path):
    from vfm_curator.api import problem_text
    from vfm_curator.pipelines.shard_summary import ShardSummary

    kinds = {"decode": {"count": 1, "reason": "broken", "cause": "input"},
             "too-short": {"count": 5, "reason": "too short", "cause": "config"},
             "no-caption": {"count": 3, "reason": "no caption", "cause": "input"},
             "timeout": {"count": 2, "reason": "slow", "cause": "machine"}}
    summary = ShardSummary(out=str(tmp_path), clips=11, tried=11, failures=11, failure_kinds=kinds)
    assert problem_text(summary) == (
        "no sample written: 5 of 11 clips failed (too-short): too short; next most common: no-caption 3 (no caption), "
        f"timeout 2 (slow); see {tmp_path / 'failures.jsonl'}")


def test_the_error_crosses_processes_whole():
    import pickle
    from pathlib import Path

    from vfm_curator.errors import NothingWrittenError
    from vfm_curator.pipelines.shard_summary import ShardSummary

    error = NothingWrittenError("no sample written", ShardSummary(out="x", clips=3), Path("x/failures.jsonl"))
    again = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own object, as Ray moves it
    assert (str(again), again.summary, again.failures) == (str(error), error.summary, error.failures)


def test_shard_after_a_curation_where_every_video_failed_names_how_many_failed_and_where_to_read_why(tmp_path):
    make_video(tmp_path / "in" / "short.mp4", [12], seed=1)  # 0.5 s, under min_clip_s
    make_video(tmp_path / "in" / "short2.mp4", [10], seed=2)
    (tmp_path / "in" / "broken.mp4").write_bytes(b"\x00" * 64)  # not a video
    clips = tmp_path / "clips"
    with pytest.raises(NothingWrittenError):
        vfm_curator.curate(tmp_path / "in", clips, {**SERIAL, "options": {"split": {"min_clip_s": 1.0}}})
    shard = {**SERIAL, "shard": {"tokenizer": "pixel", "text_encoder": "hash", "resolutions": [[16, 16]], "frames": [8]}}
    with pytest.raises(NothingWrittenError) as caught:
        vfm_curator.shard(clips, tmp_path / "shards", shard)
    assert str(caught.value) == (
        "no sample written: the clip table lists no clips: vfm curate gave none, 3 of its videos failed "
        f"(too-short 2, unusable-input 1); why: {clips / 'failures.jsonl'}, {clips / 'report.html'}")
