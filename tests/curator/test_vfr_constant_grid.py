"""A variable-frame-rate source (a phone that drops from 24 to 12 frames a second) is curated onto a
constant grid: output frame j shows the source frame on screen near the clip's time j / fps, so the
clip plays at real speed (it used to write the source frames one after the other at the average
rate: the 24 fps part slowed down, the 12 fps part sped up)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow.parquet as pq
import pytest

import vfm_curator
from vfm_curator.io.video import iter_frames
from vfm_curator.stages.transcode import frame_copies
from vfm_curator.tasks import Clip

FAST, SLOW = 24, 12  # frames at 24 fps (1 s), then at 12 fps (1 s)
LEVEL0, STEP = 30, 5  # frame k is a flat grey of LEVEL0 + STEP * k


def _source(path) -> np.ndarray:
    """Write the source; return its frame times (s)."""
    import av

    times = [k / 24 for k in range(FAST)] + [1 + k / 12 for k in range(SLOW)]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=18)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"crf": "10", "preset": "ultrafast"}
        stream.codec_context.time_base = Fraction(1, 1000)
        for k, t in enumerate(times):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), LEVEL0 + STEP * k, np.uint8), format="rgb24")
            frame.pts, frame.time_base = round(t * 1000), Fraction(1, 1000)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return np.asarray(times)


def test_a_variable_rate_source_plays_at_real_speed_after_curation(tmp_path):
    (tmp_path / "in").mkdir()
    times = _source(tmp_path / "in" / "phone.mp4")
    config = {"stages": ["decode", "split", "transcode", "write"], "run": {"runner": "serial"},
              "options": {"split": {"threshold": 60.0, "min_clip_s": 0.4}}}
    vfm_curator.curate(tmp_path / "in", tmp_path / "out", config)
    (row,) = pq.read_table(tmp_path / "out" / "clips.parquet").to_pylist()
    fps = float(row["fps"])
    shown = [int(round((float(frame.mean()) - LEVEL0) / STEP)) for _, frame in iter_frames(str(tmp_path / "out" / row["path"]))]
    assert len(shown) == row["num_frames"]
    # the clip lasts as long as the source: ~2 s of frames at its rate
    assert abs(len(shown) / fps - (times[-1] - times[0] + 1 / SLOW)) <= 1.5 / fps
    for j, k in enumerate(shown):  # each output frame shows a source frame from its own moment
        assert 0 <= k < len(times)
        assert abs(times[k] - (times[0] + j / fps)) <= 1.0 / fps + 1e-3, (j, k, fps)
    assert shown == sorted(shown)  # time never runs backwards


def test_a_constant_rate_clip_is_written_frame_for_frame():
    def copies(times, fps=24.0):
        clip = Clip(start=0, end=len(times), start_s=float(times[0]), end_s=float(times[-1]) + 1 / fps, id="c")
        return [frame_copies(times, i, clip, fps) for i in range(len(times))]

    assert copies(np.arange(10) / 24) == [1] * 10
    assert copies(np.cumsum([0, 1.4, 0.6, 1.4, 0.6, 1.4, 0.6]) / 24) == [1] * 7  # alternating durations: one each
    assert copies(np.arange(5) / 12) == [2, 2, 2, 2, 1]  # a 12 fps stretch on a 24 fps grid: each frame twice


def test_a_variable_rate_clip_cut_by_a_size_change_keeps_both_parts(tmp_path):
    # two recordings joined with cat, the second starting 4 frames after the first ended (a pause)
    # and at another size: a variable rate, and a clip cut at the size change. The first part's
    # last frame stays on screen until the second part starts (4 slots of the grid), which its
    # clip must count, not drop the clip as "fewer frames than detected".
    from tests.curator import messy_inputs as messy

    messy.spliced(tmp_path / "in" / "paused.ts",
                  [dict(num_frames=25, fps=25), dict(num_frames=25, fps=25, width=96, height=64, first=25,
                                                     pts=list(range(28, 53)))])
    config = {"run": {"runner": "serial"}, "options": {"split": {"method": "stride", "stride_s": 5.0, "min_clip_s": 0.5}}}
    vfm_curator.curate(tmp_path / "in", tmp_path / "out", config)
    rows = sorted(pq.read_table(tmp_path / "out" / "clips.parquet").to_pylist(), key=lambda r: r["start_frame"])
    assert [(r["width"], r["height"]) for r in rows] == [(64, 48), (96, 64)]
    for row in rows:  # each clip lasts its seconds in the source at its frame rate
        frames = list(iter_frames(str(tmp_path / "out" / row["path"])))
        assert len(frames) == row["num_frames"]
        assert row["num_frames"] == round((row["end_s"] - row["start_s"]) * float(row["fps"]))


def test_a_recording_paused_for_a_minute_gives_two_clips_at_its_own_rate(tmp_path):
    # 24 frames, a 60 s pause, 24 more: the pause is a cut, and the rate stays 24 fps (the mean step
    # over the pause said 0.77 fps, and the clip ran 0.5 s -> 61 s as a frozen frame on that grid)
    from tests.curator import messy_inputs as messy

    messy.write(tmp_path / "in" / "paused.mp4", 48, fps=24, pts=list(range(24)) + [1464 + k for k in range(24)])
    config = {"run": {"runner": "serial"}, "options": {"split": {"method": "stride", "stride_s": 5.0, "min_clip_s": 0.5}}}
    vfm_curator.curate(tmp_path / "in", tmp_path / "out", config)
    rows = sorted(pq.read_table(tmp_path / "out" / "clips.parquet").to_pylist(), key=lambda r: r["start_frame"])
    assert [(r["start_frame"], r["end_frame"]) for r in rows] == [(0, 24), (24, 48)]
    for row in rows:
        assert float(row["fps"]) == pytest.approx(24.0) and row["num_frames"] == 24
        assert row["end_s"] - row["start_s"] == pytest.approx(1.0)
