"""The decode stage's CPU scoring pass made cheaper: the scorer works on batches of frames (numpy's
per-call overhead dominated 64x36 frames scored one by one), and its small frames are shrunk by
swscale's area average. The scores must be those of the frames scored one at a time, across batch
boundaries, reads mid-batch and a frame size change, on real decoded H264; only the detection sizes
get the area average."""

from __future__ import annotations

import tracemalloc
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from vfm_curator.colour import HSVScratch, rgb_to_hsv
from vfm_curator.io.video import SCALED_FLAGS, SMALL_FLAGS, iter_frames
from vfm_curator.shot_detectors.content import FrameScorer
from vfm_curator.stages.decode import DecodeStage
from vfm_curator.synth import make_video, shot_frames
from vfm_curator.tasks import VideoTask


def _hsv_reference(frames: np.ndarray) -> np.ndarray:
    """RGB -> HSV as it was written before batching (one ``np.where`` per sector; float32)."""
    rgb = frames.astype(np.float32) / np.float32(255.0)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    v = np.maximum(np.maximum(r, g), b)
    delta = v - np.minimum(np.minimum(r, g), b)
    is_r = v == r
    is_g = ~is_r & (v == g)
    h = np.where(is_r, g - b, np.where(is_g, b - r, r - g))
    h /= np.maximum(delta, np.float32(1e-12))
    h += np.where(is_r, np.float32(0), np.where(is_g, np.float32(2), np.float32(4)))
    h *= np.float32(60.0)
    h[h < 0] += np.float32(360.0)
    h[delta <= 0] = 0.0
    out = np.empty(frames.shape, np.float32)
    out[..., 0] = h * np.float32(0.5)
    out[..., 1] = delta / np.maximum(v, np.float32(1e-12)) * np.float32(255.0)
    out[..., 2] = v * np.float32(255.0)
    return out


def _per_frame_scores(frames) -> tuple[np.ndarray, np.ndarray]:
    """The scores computed the straightforward way, one frame after another: mean |HSV change|
    (hue on its circle) and mean |grey change| / 255 against the frame before; 0 for the first frame
    and for a frame of another size than the one before it."""
    content, motion, prev = [], [], None
    for frame in frames:
        hsv = _hsv_reference(frame)
        grey = frame.astype(np.float32).mean(axis=-1)
        if prev is None or prev[0].shape != hsv.shape:
            content.append(0.0)
            motion.append(0.0)
        else:
            d = np.abs(hsv - prev[0])
            d[..., 0] = np.minimum(d[..., 0], 180.0 - d[..., 0])
            content.append(float(d.mean()))
            motion.append(float(np.abs(grey - prev[1]).mean()) / 255.0)
        prev = hsv, grey
    return np.array(content, np.float32), np.array(motion, np.float32)


def _resolution_change_video(path: Path) -> int:
    """An H264 stream (MPEG-TS) whose frame size changes from 160x96 to 128x128 at frame 30 (a new
    SPS mid-stream, as spliced broadcasts and some screen recordings have). Returns that frame."""
    raw = path.with_suffix(".h264")
    with open(raw, "wb") as out:
        for (w, h), seed in (((160, 96), 1), ((128, 128), 2)):
            enc = av.CodecContext.create("libx264", "w")
            enc.width, enc.height, enc.pix_fmt, enc.time_base = w, h, "yuv420p", Fraction(1, 24)
            enc.options = {"preset": "ultrafast", "crf": "18"}
            for i, img in enumerate(shot_frames(30, w, h, np.random.default_rng(seed), speed=2.0)):
                frame = av.VideoFrame.from_ndarray(img, format="rgb24")
                frame.pts = i
                for packet in enc.encode(frame):
                    out.write(bytes(packet))
            for packet in enc.encode(None):
                out.write(bytes(packet))
    with av.open(str(raw), format="h264") as src, av.open(str(path), "w", format="mpegts") as dst:
        stream = dst.add_stream_from_template(src.streams.video[0])
        for i, packet in enumerate(p for p in src.demux(video=0) if p.size):
            packet.stream, packet.time_base = stream, Fraction(1, 90000)
            packet.pts = packet.dts = i * 3750  # 24 fps
            dst.mux(packet)
    return 30


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("scorer")
    cuts = d / "cuts.mp4"
    make_video(cuts, [23, 31, 40], seed=4, width=160, height=90, speed=2.0)  # 94 frames: 3 batches of 32
    change = d / "change.ts"
    _resolution_change_video(change)
    return {"cuts": cuts, "change": change}


def test_resolution_change_fixture_changes_size_midway(videos):
    sizes = [f.shape for _, f in iter_frames(str(videos["change"]))]
    assert len(sizes) == 60 and sizes[29] == (96, 160, 3) and sizes[30] == (128, 128, 3)


@pytest.mark.parametrize("batch", [1, 7, 32])
def test_batched_scores_are_the_frame_by_frame_scores_across_batches_reads_and_a_size_change(videos, batch):
    small = [f for _, f in iter_frames(str(videos["cuts"]), width=64, height=36)]
    full = [f for _, f in iter_frames(str(videos["change"]))]  # 160x96, then 128x128 from frame 30
    frames = small + full + small[:20]  # sizes change at 94 (mid-batch for 7 and 32), 124 and 154
    want_content, want_motion = _per_frame_scores(frames)

    scorer = FrameScorer(batch=batch)
    for i, frame in enumerate(frames):
        scorer.push(frame)
        if i in (40, 41, 100):  # reading scores mid-batch scores the frames so far; the stream goes on
            assert len(scorer.content) == len(scorer.motion) == i + 1
    content, motion = scorer.content, scorer.motion

    np.testing.assert_allclose(content, want_content, rtol=1e-6, atol=0)
    np.testing.assert_allclose(motion, want_motion, rtol=1e-6, atol=0)
    assert (content[[0, 94, 124, 154]] == 0).all()  # the first frame, and each first of another size
    assert (content[1:94] > 0).all() and content[[23, 54]].min() > 27 > content[1:23].max()  # real cuts


def test_decode_stage_scores_a_stream_that_changes_size_as_frame_by_frame(videos):
    """The decode stage scales every frame to one small size (the size change reads as a cut): its
    batched scores are the per-frame ones on the same small frames, across the change."""
    task = VideoTask(str(videos["change"]))
    DecodeStage(decoder="pyav").process([task])
    assert task.failure is None, task.failure
    w, h = task.small_size
    small = [f for _, f in iter_frames(str(videos["change"]), width=w, height=h)]
    want_content, want_motion = _per_frame_scores(small)
    assert len(task.cut_scores) == len(small) == 60
    np.testing.assert_allclose(task.cut_scores, want_content, rtol=1e-6, atol=0)
    np.testing.assert_allclose(task.motion, want_motion, rtol=1e-6, atol=0)
    assert task.cut_scores[30] > 27


def test_rgb_to_hsv_into_reused_scratch_is_the_reference_to_the_bit(videos):
    frames = np.stack([f for _, f in iter_frames(str(videos["cuts"]), width=64, height=36)])
    steps = np.arange(0, 256, 5, dtype=np.uint8)  # every sector, ties between channels, greys
    grid = np.stack(np.meshgrid(steps, steps, steps, indexing="ij"), axis=-1).reshape(52, 52 * 52, 3)
    for batch in (grid, frames):
        want = _hsv_reference(batch).view(np.uint32)
        assert np.array_equal(rgb_to_hsv(batch).view(np.uint32), want)
        scratch = HSVScratch((32, *batch.shape[1:-1]))
        out = np.empty((32, *batch.shape[1:]), np.float32)
        for start in range(0, len(batch), 32):  # full batches, then a shorter last one
            part = batch[start : start + 32]
            got = rgb_to_hsv(part, out[: len(part)], scratch=scratch)
            assert np.array_equal(got.view(np.uint32), want[start : start + 32])
    with pytest.raises(ValueError, match="cannot hold"):
        rgb_to_hsv(frames[:40], scratch=HSVScratch((32, 36, 64)))


def test_frame_scorer_holds_one_frame_of_large_frames_and_a_bounded_batch_of_small_ones():
    rng = np.random.default_rng(0)
    big = [rng.integers(0, 256, (720, 1280, 3), dtype=np.uint8) for _ in range(3)]
    FrameScorer().push(big[0])  # warm up
    tracemalloc.start()
    try:
        scorer = FrameScorer(batch=64)
        for frame in big:
            scorer.push(frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # one frame's work arrays are ~75 bytes a pixel (69 MB here); a 64-frame batch would be 4.4 GB
    assert peak < 2 * 75 * 720 * 1280, peak
    assert len(scorer.content) == 3 and scorer.content[0] == 0 and scorer.content[1] > 0


@pytest.mark.parametrize("bad", [np.zeros((4, 4), np.uint8), np.zeros((4, 4, 3), np.float32), np.zeros((2, 4, 4, 3), np.uint8)])
def test_frame_scorer_refuses_what_is_not_one_uint8_rgb_frame(bad):
    with pytest.raises(ValueError, match=r"expected an \(h, w, 3\) uint8 RGB frame"):
        FrameScorer().push(bad)


@pytest.mark.parametrize("batch", [0, -1, 2.5, True])
def test_frame_scorer_refuses_a_batch_that_is_not_a_positive_whole_number(batch):
    with pytest.raises(ValueError, match="batch must be a positive whole number"):
        FrameScorer(batch=batch)


@pytest.mark.parametrize(("size", "flags"), [
    ((64, 36), SMALL_FLAGS),  # the decode stage's frames (5x smaller)
    ((48, 26), SMALL_FLAGS),  # a detector's own (TransNetV2's 48x27 rounded to even)
    ((128, 72), SMALL_FLAGS),  # the largest detection size
    ((160, 90), SCALED_FLAGS),  # above it: shard or sample frames
    ((200, 112), SCALED_FLAGS),  # under 2x smaller
])
def test_only_detection_sized_frames_are_shrunk_by_area_average(tmp_path, size, flags):
    from av.video.reformatter import VideoReformatter

    path = tmp_path / "v.mp4"
    make_video(path, [4], seed=2, width=320, height=180, speed=2.0)
    got = [f for _, f in iter_frames(str(path), width=size[0], height=size[1])]
    with av.open(str(path)) as container:
        decoded = list(container.decode(video=0))
    for frame, rgb in zip(decoded, got, strict=True):
        want = {f: VideoReformatter().reformat(frame, width=size[0], height=size[1], format="rgb24", interpolation=f)
                .to_ndarray() for f in (SMALL_FLAGS, SCALED_FLAGS)}
        assert not np.array_equal(want[SMALL_FLAGS], want[SCALED_FLAGS])  # the two filters differ here
        assert np.array_equal(rgb, want[flags])
