"""The decode stage refuses a video whose declared frame size is over ``max_pixels`` (kind
``too-large``, cause ``config``) before decoding a frame; real H264 files, the limit lowered to
their size (a real 16384x16384 file would take gigabytes to write and read)."""

from __future__ import annotations

import av
import numpy as np
import pytest

from vfm_curator import failures
from vfm_curator.errors import LimitError
from vfm_curator.io import probing
from vfm_curator.io.video import MAX_PIXELS, probe
from vfm_curator.stages.decode import DecodeStage
from vfm_curator.synth import make_video
from vfm_curator.tasks import VideoTask


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    path = tmp_path_factory.mktemp("size") / "v.mp4"
    make_video(path, [6], width=64, height=48, seed=3)
    return str(path)


def test_a_frame_over_max_pixels_fails_as_too_large_naming_size_and_limit(clip):
    task = VideoTask(clip)
    DecodeStage(decoder="pyav", max_pixels=64 * 48 - 1).process([task])
    assert task.failure is not None and task.failure["stage"] == "decode"
    assert (task.failure["cause"], task.failure["kind"]) == ("config", "too-large")
    assert "64x48" in task.failure["reason"] and "max_pixels=3071" in task.failure["reason"]
    assert task.meta == {} or "width" not in task.meta  # refused before the stage filled anything


def test_a_frame_at_max_pixels_is_decoded(clip):
    task = VideoTask(clip)
    DecodeStage(decoder="pyav", max_pixels=64 * 48).process([task])
    assert task.failure is None and (task.meta["width"], task.meta["height"]) == (64, 48)
    assert len(task.cut_scores) == 6


def test_the_size_is_refused_before_any_frame_is_decoded(clip, monkeypatch):
    def decodes(*args, **kwargs):
        raise AssertionError("a frame was decoded")

    monkeypatch.setattr(probing, "_stream_rotation", decodes)  # probe's first decode (called from its module)
    with pytest.raises(LimitError, match=r"frame size 64x48 .* over the limit") as refused:
        probe(clip, max_pixels=100)
    assert refused.value.kind == "too-large"
    with pytest.raises(AssertionError, match="a frame was decoded"):
        probe(clip, max_pixels=64 * 48)  # under the limit: probing goes on to decode


def test_8k_uhd_passes_the_default(tmp_path):
    """One real 7680x4320 H264 frame (99 KB; ~0.4 s and ~350 MB to write and decode)."""
    path = str(tmp_path / "8k.mp4")
    with av.open(path, "w") as container:
        stream = container.add_stream("libx264", rate=24)
        stream.width, stream.height, stream.pix_fmt = 7680, 4320, "yuv420p"
        stream.options = {"preset": "ultrafast"}
        frame = av.VideoFrame(7680, 4320, "yuv420p")
        for plane in frame.planes:
            np.frombuffer(plane, np.uint8)[:] = 128
        for packet in [*stream.encode(frame), *stream.encode()]:
            container.mux(packet)
    assert 8192 * 4320 <= MAX_PIXELS < 16384 * 16384  # DCI 8K passes too; a 16384x16384 header does not
    task = VideoTask(path)
    DecodeStage(decoder="pyav", min_frames=1).process([task])
    assert task.failure is None and (task.meta["width"], task.meta["height"]) == (7680, 4320)


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "8192x8192", None])
def test_max_pixels_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match=r"option max_pixels .*(integer|range)"):
        DecodeStage(max_pixels=bad)


def test_too_large_failures_can_be_retried_by_kind():
    assert failures.check_retry("too-large") == "too-large"
