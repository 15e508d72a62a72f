"""Shot detection finds the cuts of synthetic videos with known cut frames."""

from __future__ import annotations

import numpy as np
import pytest

from vfm_curator.io.video import frames_at
from vfm_curator.stages.decode import DecodeStage
from vfm_curator.shot_detectors.content import content_scores, detect_cuts
from vfm_curator.shot_detectors.spans import fixed_stride, limit_lengths, shots_from_cuts
from vfm_curator.stages.split import SplitStage
from vfm_curator.synth import make_video
from vfm_curator.tasks import VideoTask, clip_id


def _match(found: list[int], truth: list[int], tolerance: int = 1) -> tuple[int, list[int]]:
    """Greedy one-to-one matching within ``tolerance`` frames: (true positives, offsets)."""
    unused = list(found)
    offsets = []
    for cut in truth:
        near = [f for f in unused if abs(f - cut) <= tolerance]
        if near:
            best = min(near, key=lambda f: abs(f - cut))
            unused.remove(best)
            offsets.append(best - cut)
    return len(offsets), offsets


def test_content_detection_finds_known_cuts_with_f1_at_least_095(tmp_path):
    rng = np.random.default_rng(1234)
    tp = fp = fn = 0
    offsets: list[int] = []
    for i in range(8):
        lengths = [int(x) for x in rng.integers(12, 60, size=int(rng.integers(3, 7)))]
        path = tmp_path / f"v{i}.mp4"
        truth = make_video(path, lengths, seed=i, width=96, height=64)
        task = VideoTask(str(path))
        DecodeStage().process([task])
        SplitStage(min_clip_s=0.1, min_shot_s=0.25).process([task])
        assert task.failure is None, task.failure
        found = task.meta["cuts"]
        hits, offs = _match(found, truth)
        tp, fp, fn = tp + hits, fp + len(found) - hits, fn + len(truth) - hits
        offsets += offs
    f1 = 2 * tp / (2 * tp + fp + fn)
    assert f1 >= 0.95, (tp, fp, fn)
    assert all(abs(o) <= 1 for o in offsets)


def test_content_scores_peak_only_at_cuts_of_a_moving_pattern(tmp_path):
    path = tmp_path / "v.mp4"
    truth = make_video(path, [30, 30], seed=3)
    task = VideoTask(str(path))
    DecodeStage().process([task])
    scores = task.cut_scores
    assert np.allclose(scores, content_scores(frames_at(task.source, range(60), width=64, height=42).values()))
    assert int(np.argmax(scores)) == truth[0]
    inside = np.delete(scores, truth[0])
    assert inside.max() < 27.0 < scores[truth[0]]


def test_min_shot_suppresses_cuts_closer_than_it():
    scores = np.zeros(50, np.float32)
    scores[[10, 13, 30]] = 100.0
    assert detect_cuts(scores, threshold=27, min_shot=5) == [10, 30]


def test_adaptive_ratio_ignores_a_steady_high_score():
    scores = np.full(40, 40.0, np.float32)  # fast motion: every frame changes a lot
    scores[20] = 200.0  # a real cut stands out
    assert detect_cuts(scores, threshold=27, min_shot=1, adaptive_ratio=0.0)[:3] == [1, 2, 3]
    assert detect_cuts(scores, threshold=27, min_shot=1, adaptive_ratio=3.0) == [20]


def test_fixed_stride_and_length_limits():
    assert fixed_stride(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert shots_from_cuts([3, 7], 10) == [(0, 3), (3, 7), (7, 10)]
    # too short dropped; too long cut into equal pieces no longer than max_len
    assert limit_lengths([(0, 2), (2, 12)], min_len=3, max_len=4) == [(2, 5), (5, 9), (9, 12)]


def test_split_applies_min_and_max_clip_length_and_deterministic_ids(tmp_path):
    path = tmp_path / "v.mp4"
    make_video(path, [12, 100], seed=5, fps=24)
    task = VideoTask(str(path))
    DecodeStage().process([task])
    SplitStage(min_clip_s=1.0, max_clip_s=2.0).process([task])
    spans = [(c.start, c.end) for c in task.clips]
    # the 12-frame shot is under 1 s; the 100-frame one is cut into ceil(100 / 48) = 3 equal pieces
    assert spans == [(12, 45), (45, 79), (79, 112)]
    assert [c.id for c in task.clips] == [clip_id(str(path), a, b) for a, b in spans]
    assert task.clips[0].start_s == pytest.approx(12 / 24)


def test_split_rejects_unknown_method_and_options(tmp_path):
    with pytest.raises(ValueError, match="unknown option.*accepted"):
        SplitStage(treshold=3)
    with pytest.raises(ValueError, match="unknown method 'magic'; accepted: adaptive, content, transnetv2, stride"):
        SplitStage(method="magic")  # refused when the stage is built, before any video is decoded


def test_split_keeps_the_old_content_options_and_refuses_them_for_other_detectors():
    old = SplitStage(method="content", threshold=12.0, adaptive_ratio=2.0, min_shot_s=0.5)  # an older config
    assert old.detector.name == "content"
    assert old.detector.opt == {"threshold": 12.0, "adaptive_ratio": 2.0, "min_shot_s": 0.5}
    assert SplitStage().detector.opt == {"threshold": 27.0, "adaptive_ratio": 0.0, "min_shot_s": 0.25}
    assert SplitStage(method="adaptive", min_shot_s=0.5).detector.opt["min_shot_s"] == 0.5
    with pytest.raises(ValueError, match="threshold does not apply to method 'adaptive'.*adaptive_threshold"):
        SplitStage(method="adaptive", threshold=3.0)
    with pytest.raises(ValueError, match="threshold is given twice"):
        SplitStage(threshold=20.0, detector_options={"threshold": 30.0})
    with pytest.raises(ValueError, match="option window_width = 0 is out of range"):
        SplitStage(method="adaptive", detector_options={"window_width": 0})
    with pytest.raises(ValueError, match="unknown option.*window.*accepted: adaptive_ratio, min_shot_s, threshold"):
        SplitStage(detector_options={"window": 3})
