"""A clip too short for every configured frame bucket fails in ``vfm shard`` as ``too-short`` with
cause ``config`` (the clip is fine; the buckets are too long for it, as ``vfm curate``'s
``too-short``), not as an ``unusable-input`` file; shorter buckets shard it on the next run."""

from __future__ import annotations

import json

import pytest

import vfm_curator
from vfm_curator.synth import make_video


def test_a_clip_shorter_than_every_bucket_is_too_short_by_config_and_shards_with_shorter_buckets(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24], seed=1)  # one 24-frame clip
    assert vfm_curator.curate(tmp_path / "in", tmp_path / "clips", {"run": {"runner": "serial"}}).clips == 1
    shard = {"run": {"runner": "serial"}, "shard": {"tokenizer": "pixel", "text_encoder": "hash", "resolutions": [[16, 16]],
                                                    "frames": [16], "frame_stride": 2, "require_captions": False}}
    with pytest.raises(vfm_curator.NothingWrittenError, match=r"1 of 1 clips failed \(too-short\)") as caught:
        vfm_curator.shard(tmp_path / "clips", tmp_path / "shards", shard)
    summary = caught.value.summary
    assert (summary.samples, summary.failures) == (0, 1)
    [failure] = [json.loads(line) for line in (tmp_path / "shards" / "failures.jsonl").read_text().splitlines()]
    assert (failure["kind"], failure["cause"], failure["stage"]) == ("too-short", "config", "shard_decode")
    assert failure["reason"] == "too short: 12 frame(s) at stride 2; the shortest bucket takes 16 (frames = [16])"
    shard["shard"]["frames"] = [8]
    again = vfm_curator.shard(tmp_path / "clips", tmp_path / "shards", shard)  # the same folder: run again
    assert (again.samples, again.failures, again.retried) == (1, 0, 1)
