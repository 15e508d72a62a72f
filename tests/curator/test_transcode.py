"""Transcoded clips are H264 with exactly the frames of their span; odd sizes, rotation, VFR."""

from __future__ import annotations

import io

import av
import numpy as np

from vfm_curator.io.video import iter_frames
from vfm_curator.stages.decode import DecodeStage
from vfm_curator.stages.split import SplitStage
from vfm_curator.stages.transcode import TranscodeStage
from vfm_curator.synth import make_video
from vfm_curator.tasks import VideoTask


def _clips(path, **split):
    task = VideoTask(str(path))
    DecodeStage().process([task])
    SplitStage(**{"min_clip_s": 0.25, **split}).process([task])
    TranscodeStage(crf=18, preset="ultrafast").process([task])
    assert task.failure is None, task.failure
    return task


def _decode(data: bytes) -> tuple[str, int, list[np.ndarray], bool]:
    with av.open(io.BytesIO(data)) as c:
        codec = c.streams.video[0].codec_context.name
        has_audio = bool(c.streams.audio)
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    return codec, len(frames), frames, has_audio


def test_clips_are_h264_with_the_span_frame_counts_and_no_audio(tmp_path):
    path = tmp_path / "v.mp4"
    make_video(path, [20, 33, 27], seed=1, audio=True)
    task = _clips(path)
    assert [(c.start, c.end) for c in task.clips] == [(0, 20), (20, 53), (53, 80)]
    source = [f for _, f in iter_frames(str(path))]
    for clip in task.clips:
        codec, n, frames, has_audio = _decode(clip.mp4)
        assert (codec, n, has_audio) == ("h264", clip.end - clip.start, False)
        assert clip.num_frames == n
        # frame-accurate: the first and last frames are the span's, not a neighbour's
        for got, want in ((frames[0], source[clip.start]), (frames[-1], source[clip.end - 1])):
            err = np.abs(got.astype(int) - want.astype(int)).mean()
            assert err < 6, err
        assert len(clip.samples) == 3


def test_odd_sized_video_is_cropped_to_even_sides(tmp_path):
    path = tmp_path / "odd.mp4"
    make_video(path, [30], seed=2, width=95, height=63)
    task = _clips(path)
    (clip,) = task.clips
    with av.open(io.BytesIO(clip.mp4)) as c:
        assert (c.streams.video[0].width, c.streams.video[0].height) == (94, 62)
    assert (clip.width, clip.height) == (94, 62)


def test_rotated_video_is_written_upright(tmp_path):
    path = tmp_path / "rot.mp4"
    make_video(path, [24], seed=3, width=96, height=64, rotation=90)
    task = _clips(path)
    assert (task.meta["width"], task.meta["height"], task.meta["rotation"]) == (64, 96, 90)
    (clip,) = task.clips
    _, n, frames, _ = _decode(clip.mp4)
    assert frames[0].shape[:2] == (96, 64)  # displayed (portrait) size
    coded = next(av.open(str(path)).decode(video=0)).to_ndarray(format="rgb24")
    upright = np.rot90(coded, k=1)  # PyAV's rotation is counter-clockwise
    assert np.abs(frames[0].astype(int) - upright.astype(int)).mean() < 6


def test_variable_frame_rate_clips_keep_every_frame(tmp_path):
    path = tmp_path / "vfr.mp4"
    make_video(path, [30, 30], seed=4, vfr=True)
    task = _clips(path)
    assert task.meta["vfr"] is True
    assert [(c.start, c.end) for c in task.clips] == [(0, 30), (30, 60)]
    for clip in task.clips:
        assert _decode(clip.mp4)[1] == clip.end - clip.start
    # times come from the presentation timestamps, not from frame index / fps
    assert task.clips[1].start_s == task.times[30]


def test_keep_audio_copies_the_spans_audio_into_each_clip(tmp_path):
    path = tmp_path / "v.mp4"
    make_video(path, [24, 48], seed=2, audio=True)  # 1 s and 2 s shots at 24 fps, a 440 Hz tone
    task = VideoTask(str(path))
    DecodeStage().process([task])
    SplitStage(min_clip_s=0.25).process([task])
    TranscodeStage(crf=18, preset="ultrafast", keep_audio=True).process([task])
    assert [(c.start, c.end) for c in task.clips] == [(0, 24), (24, 72)]
    for clip, seconds in zip(task.clips, (1.0, 2.0)):
        with av.open(io.BytesIO(clip.mp4)) as c:
            assert c.streams.video[0].codec_context.name == "h264"
            audio = c.streams.audio[0]
            samples = sum(f.samples for f in c.decode(audio))
            video_frames = sum(1 for _ in av.open(io.BytesIO(clip.mp4)).decode(video=0))
        assert video_frames == clip.end - clip.start  # the video is untouched by the remux
        covered = samples / audio.rate
        assert seconds - 0.1 <= covered <= seconds + 1e-6, (covered, seconds)  # whole packets, never past the span
