"""Stitching re-joins a shot that was split at a fake cut, and never merges across a real cut."""

from __future__ import annotations

from vfm_curator.stages.decode import DecodeStage
from vfm_curator.shot_detectors.spans import shots_from_cuts
from vfm_curator.stages.split import SplitStage, make_clip
from vfm_curator.stages.stitch import StitchStage
from vfm_curator.synth import make_video
from vfm_curator.tasks import VideoTask


def _decoded(path) -> VideoTask:
    task = VideoTask(str(path))
    DecodeStage().process([task])
    return task


def test_stitch_rejoins_fixed_stride_pieces_into_the_true_shots(tmp_path):
    path = tmp_path / "v.mp4"
    make_video(path, [48, 48], seed=7, fps=24)  # one real cut at 48
    task = _decoded(path)
    SplitStage(method="stride", stride_s=0.5, min_clip_s=0.25).process([task])  # fake cuts every 12 frames
    assert [(c.start, c.end) for c in task.clips][:3] == [(0, 12), (12, 24), (24, 36)]
    StitchStage(threshold=0.9).process([task])
    assert task.failure is None
    assert [(c.start, c.end) for c in task.clips] == [(0, 48), (48, 96)]


def test_stitch_rejoins_a_scene_split_by_a_fake_boundary(tmp_path):
    path = tmp_path / "v.mp4"
    # shots 0 and 1 are one continuous scene (a fake boundary at 30); a real cut at 60
    cuts = make_video(path, [30, 30, 30], seed=2, same_shot_after={0})
    assert cuts == [30, 60]
    task = _decoded(path)
    # clips as a detector that also fired at the fake boundary would give them
    task.clips = [make_clip(task, a, b) for a, b in shots_from_cuts(cuts, 90)]
    assert len(task.clips) == 3
    StitchStage(threshold=0.9).process([task])
    assert [(c.start, c.end) for c in task.clips] == [(0, 60), (60, 90)]


def test_stitch_respects_the_maximum_clip_length(tmp_path):
    path = tmp_path / "v.mp4"
    make_video(path, [96], seed=4, fps=24)
    task = _decoded(path)
    SplitStage(method="stride", stride_s=0.5, min_clip_s=0.25).process([task])
    StitchStage(threshold=0.9, max_clip_s=2.0).process([task])
    assert all(c.length <= 48 for c in task.clips)
    assert [(c.start, c.end) for c in task.clips] == [(0, 48), (48, 96)]
