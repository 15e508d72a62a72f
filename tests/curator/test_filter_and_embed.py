"""The filter stage scores motion and drops clips outside limits; the default embedder needs no weights."""

from __future__ import annotations

import numpy as np
import pytest

from vfm_curator.embedders import get_embedder
from vfm_curator.io.video import frames_at
from vfm_curator.stages.decode import DecodeStage
from vfm_curator.stages.filter import FilterStage
from vfm_curator.stages.split import SplitStage
from vfm_curator.synth import make_video
from vfm_curator.tasks import VideoTask


def _split(path) -> VideoTask:
    task = VideoTask(str(path))
    DecodeStage().process([task])
    SplitStage(min_clip_s=0.5).process([task])
    return task


def test_motion_filter_rejects_a_still_shot_and_keeps_a_moving_one(tmp_path):
    still, moving = _split(_video(tmp_path / "s.mp4", 0.0)), _split(_video(tmp_path / "m.mp4", 2.0))
    stage = FilterStage(min_motion=0.005)
    stage.process([still, moving])
    assert still.clips[0].scores["motion"] < 0.001 < 0.005 < moving.clips[0].scores["motion"]
    assert "motion" in still.clips[0].rejected and moving.clips[0].rejected is None


def test_duration_and_pluggable_score_filters(tmp_path):
    task = _split(_video(tmp_path / "m.mp4", 2.0))
    FilterStage(min_duration_s=5.0).process([task])
    assert "duration" in task.clips[0].rejected
    task = _split(_video(tmp_path / "m.mp4", 2.0))
    FilterStage(scorers=[{"name": "motion", "max": 0.0001}]).process([task])
    assert task.clips[0].rejected.startswith("motion") and "motion" in task.clips[0].scores
    with pytest.raises(Exception, match="unknown scorer 'nope'; available: .*motion"):
        FilterStage(scorers=[{"name": "nope"}]).ensure_setup()


def test_histogram_embedder_separates_shots(tmp_path):
    task = VideoTask(str(tmp_path / "v.mp4"))
    make_video(task.source, [20, 20], seed=9)
    DecodeStage().process([task])
    frames = frames_at(task.source, [18, 19, 20], width=task.small_size[0], height=task.small_size[1])
    e = get_embedder("histogram").embed(np.stack([frames[18], frames[19], frames[20]]))  # a cut at 20
    assert e.shape == (3, 144) and np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    assert e[0] @ e[1] > 0.9 > e[1] @ e[2]
    with pytest.raises(Exception, match="unknown embedder 'nope'; available: clip, histogram"):
        get_embedder("nope")


def _video(path, speed):
    make_video(path, [24], seed=3, speed=speed)
    return path
