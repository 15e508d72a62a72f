"""Shot detection as a stream: the same cuts and motion scores as the whole-video algorithm it
replaced, on real H264 files (hard cuts and a fade), with memory that does not grow with length."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from vfm_curator.colour import rgb_to_hsv
from vfm_curator.io.video import frames_at, iter_frames, probe, small_size
from vfm_curator.stages.decode import DecodeStage
from vfm_curator.shot_detectors.content import detect_cuts
from vfm_curator.stages.split import SplitStage
from vfm_curator.synth import make_video, shot_frames, write_video
from vfm_curator.tasks import VideoTask


# --- the algorithm before streaming, kept here as the reference: every frame decoded and stacked,
# --- then HSV of all of them at once
def _old_small_frames(path: str, width: int = 64) -> np.ndarray:
    info = probe(path)
    w, h = small_size(info.width, info.height, width)
    return np.stack([f for _, f in iter_frames(path, width=w, height=h)])


def _old_content_scores(frames: np.ndarray) -> np.ndarray:
    hsv = rgb_to_hsv(frames)
    d = np.abs(np.diff(hsv, axis=0))
    d[..., 0] = np.minimum(d[..., 0], 180.0 - d[..., 0])
    per_channel = d.reshape(len(d), -1, 3).mean(axis=1)
    return np.concatenate([[0.0], per_channel.mean(axis=1)]).astype(np.float32)


def _old_motion(small: np.ndarray, start: int, end: int) -> float:
    if end - start < 2:
        return 0.0
    grey = small[start:end].astype(np.float32).mean(axis=-1)
    return float(np.abs(np.diff(grey, axis=0)).mean() / 255.0)


def _fade_video(path, seed: int = 0) -> list[int]:
    """Shot A, a 12-frame fade to white and a 12-frame fade in of shot B, then a hard cut to shot C."""
    rng = np.random.default_rng(seed)
    a = list(shot_frames(40, 96, 64, rng))
    b = list(shot_frames(40, 96, 64, rng))
    c = list(shot_frames(30, 96, 64, rng))
    white = np.full_like(a[0], 255)
    ramp = np.linspace(0.0, 1.0, 12)
    out = a[:28] + [(f * (1 - r) + white * r).astype(np.uint8) for f, r in zip(a[28:], ramp)]
    out += [(f * r + white * (1 - r)).astype(np.uint8) for f, r in zip(b[:12], ramp)] + b[12:] + c
    write_video(path, out, fps=24)
    return [80]


def _new_cuts(path, **split) -> tuple[VideoTask, list[int]]:
    task = VideoTask(str(path))
    DecodeStage().process([task])
    SplitStage(**split).process([task])
    assert task.failure is None, task.failure
    return task, task.meta["cuts"]


@pytest.mark.parametrize("kind", ["hard cuts", "fade", "adaptive"])
def test_streaming_detection_gives_the_same_cuts_and_motion_as_the_whole_video_algorithm(tmp_path, kind):
    path = tmp_path / "v.mp4"
    if kind == "fade":
        truth = _fade_video(path, seed=3)
    else:
        truth = make_video(path, [30, 17, 45, 24, 60], seed=11, speed=2.0)
    split = {"min_clip_s": 0.1, "min_shot_s": 0.25, "adaptive_ratio": 2.0 if kind == "adaptive" else 0.0}
    task, cuts = _new_cuts(path, **split)

    small = _old_small_frames(str(path))
    old_scores = _old_content_scores(small)
    np.testing.assert_allclose(task.cut_scores, old_scores, rtol=1e-4, atol=1e-4)
    fps = float(task.meta["fps"])
    old_cuts = detect_cuts(old_scores, threshold=27.0, min_shot=max(1, round(0.25 * fps)),
                           adaptive_ratio=split["adaptive_ratio"])
    assert cuts == old_cuts
    assert set(truth) <= set(cuts)  # every hard cut found (a fade may add its own boundary)
    for clip in task.clips:
        assert task.motion is not None
        from vfm_curator.stages.filter import motion_score

        assert motion_score(task, clip.start, clip.end) == pytest.approx(_old_motion(small, clip.start, clip.end), rel=1e-4, abs=1e-7)


def test_frames_at_returns_the_frames_a_full_decode_gives(tmp_path):
    path = tmp_path / "v.mp4"
    make_video(path, [20, 20], seed=5)
    small = _old_small_frames(str(path))
    got = frames_at(str(path), [0, 19, 20, 39, 400], width=small.shape[2], height=small.shape[1])
    assert sorted(got) == [0, 19, 20, 39]  # 400 is past the end
    for i, frame in got.items():
        np.testing.assert_array_equal(frame, small[i])


def _peak_bytes_of_decode(path) -> int:
    tracemalloc.start()
    try:
        task = VideoTask(str(path))
        DecodeStage().process([task])
        assert task.failure is None, task.failure
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_decode_memory_does_not_grow_with_the_video_length(tmp_path):
    # 8x the frames; the old decode stage held every small frame and float HSV arrays of all of them
    # (about 8 KB + 64 KB per frame here), the stream holds one frame and 16 bytes per frame
    short, long = tmp_path / "short.mp4", tmp_path / "long.mp4"
    make_video(short, [60, 60], seed=1, speed=0.0)
    make_video(long, [480, 480], seed=1, speed=0.0)
    _peak_bytes_of_decode(short)  # warm up imports and caches
    small, large = _peak_bytes_of_decode(short), _peak_bytes_of_decode(long)
    assert large < small + 200_000, (small, large)
