"""The transcode stage's NVENC probe: ``encoder="auto"`` falls back to libx264 with one notice where no
NVENC opens (every CI machine, and an H100), writing the same bytes as libx264 did before; a forced
``h264_nvenc`` there is a clear error before any work. The NVENC path itself: tests/gpu/test_curator_gpu.py."""

from __future__ import annotations

import io
import logging

import av
import pytest

from vfm_curator.io import encode
from vfm_curator.stages.decode import DecodeStage
from vfm_curator.stages.split import SplitStage
from vfm_curator.stages.transcode import TranscodeStage
from vfm_curator.synth import make_video
from vfm_curator.tasks import VideoTask

pytestmark = pytest.mark.skipif(encode.nvenc_available(), reason="NVENC opens here: the fallback cannot be seen")


@pytest.fixture
def fresh_probe(monkeypatch):
    """A process that has not probed yet: no cached answer, no notice given; counts the probes."""
    monkeypatch.setattr(encode, "_NVENC", None)
    monkeypatch.setattr(encode, "_NOTICE_GIVEN", False)
    calls = []
    real = encode.encode_h264

    def counting(frames, fps, **kwargs):
        if kwargs.get("codec") == "h264_nvenc":
            calls.append(1)
        return real(frames, fps, **kwargs)

    monkeypatch.setattr(encode, "encode_h264", counting)
    # as on a GPU machine without NVENC (an H100): a device node, so FFmpeg's encoder is really tried
    monkeypatch.setattr(encode.glob, "glob", lambda pattern: ["/dev/nvidia0"])
    return calls


def test_without_an_nvidia_device_node_the_probe_does_not_open_ffmpeg(monkeypatch):
    monkeypatch.setattr(encode, "_NVENC", None)
    tried = []
    monkeypatch.setattr(encode, "encode_h264", lambda *a, **k: tried.append(1))
    monkeypatch.setattr(encode.glob, "glob", lambda pattern: [])
    assert encode.nvenc_probe() == (False, "no NVIDIA GPU device (/dev/nvidia*) here") and tried == []


def _split(tmp_path):
    make_video(tmp_path / "v.mp4", [20, 16], seed=5)
    task = VideoTask(str(tmp_path / "v.mp4"))
    DecodeStage().process([task])
    SplitStage(min_clip_s=0.25).process([task])
    assert task.failure is None and len(task.clips) == 2
    return task


def test_auto_falls_back_to_libx264_with_exactly_one_notice_and_the_same_bytes(tmp_path, fresh_probe, caplog):
    task = _split(tmp_path)
    before = [c.mp4 for c in TranscodeStage(encoder="libx264", threads=1).process([task])[0].clips]
    assert fresh_probe == [] and not caplog.records  # libx264 by name never probes
    task = _split(tmp_path)
    with caplog.at_level(logging.INFO, logger="vfm_curator.encode"):
        for _ in range(3):  # three workers' setups in one process: one probe, one notice
            stage = TranscodeStage(threads=1)  # encoder defaults to auto; preset veryfast: High profile
            stage.ensure_setup()
            assert stage.codec == "libx264"
        stage.process([task])
    assert len(fresh_probe) == 1
    notices = [r for r in caplog.records if r.name == "vfm_curator.encode"]
    assert len(notices) == 1 and "\n" not in notices[0].getMessage()
    assert "NVENC is not available here" in notices[0].getMessage() and "libx264" in notices[0].getMessage()
    assert [c.mp4 for c in task.clips] == before  # byte for byte what libx264 wrote before
    with av.open(io.BytesIO(task.clips[0].mp4)) as c:
        ctx = c.streams.video[0].codec_context
        assert (ctx.name, ctx.profile, ctx.pix_fmt) == ("h264", "High", "yuv420p")


def test_forced_nvenc_without_one_is_a_clear_error_before_any_work(fresh_probe):
    with pytest.raises(ValueError, match=r"stage 'transcode': encoder 'h264_nvenc' cannot open here \(.+\); NVENC needs"):
        TranscodeStage(encoder="h264_nvenc")
    with pytest.raises(ValueError, match="unknown encoder 'nvenc'; accepted: auto, libx264, h264_nvenc"):
        TranscodeStage(encoder="nvenc")
    with pytest.raises(ValueError, match="cannot open here"):
        encode.pick_codec("h264_nvenc")
    assert len(fresh_probe) == 1  # the answer is cached


def test_a_gpu_share_is_declared_only_when_nvenc_will_encode(monkeypatch, fresh_probe):
    assert TranscodeStage().configured_resources is None  # no NVENC here: CPU only, as before
    assert TranscodeStage(encoder="libx264").configured_resources is None
    monkeypatch.setattr(encode, "_NVENC", (True, ""))  # what the probe answers on an L4 / L40S
    declared = TranscodeStage(gpu_share=0.2).configured_resources
    assert declared is not None and declared.gpus == 0.2 and declared.cpus == 1.0
    assert TranscodeStage(encoder="libx264").configured_resources is None
    assert encode.pick_codec("auto") == "h264_nvenc"
