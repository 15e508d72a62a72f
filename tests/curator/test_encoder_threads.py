"""libx264's thread count: one per Ray worker CPU (OMP_NUM_THREADS), x264's own choice alone."""

from __future__ import annotations

import io

import av
import pytest

from vfm_curator.stages.decode import DecodeStage
from vfm_curator.stages.split import SplitStage
from vfm_curator.io.encode import H264Writer
from vfm_curator.stages import transcode
from vfm_curator.stages.transcode import TranscodeStage, encoder_threads
from vfm_curator.synth import make_video
from vfm_curator.tasks import VideoTask


def test_threads_follow_the_option_then_omp_num_threads_then_x264(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert encoder_threads(None) == 0  # one process alone: libx264 picks (about 1.5 per core)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what a Ray worker of a 1-CPU call has
    assert encoder_threads(None) == 1
    assert encoder_threads(3) == 3  # the option wins
    monkeypatch.setenv("OMP_NUM_THREADS", "many")
    assert encoder_threads(None) == 0
    with pytest.raises(ValueError, match="option threads = -1 is out of range"):
        TranscodeStage(threads=-1)


def test_the_encoder_is_opened_with_the_worker_s_thread_count(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    make_video(tmp_path / "v.mp4", [30, 30], seed=3)
    task = VideoTask(str(tmp_path / "v.mp4"))
    DecodeStage().process([task])
    SplitStage(min_clip_s=0.25).process([task])
    seen = []

    class Recording(H264Writer):  # the real writer; notes the thread count its encoder runs with
        def close(self):
            seen.append(self.stream.codec_context.thread_count)
            return super().close()

    monkeypatch.setattr(transcode, "H264Writer", Recording)
    TranscodeStage(preset="ultrafast").process([task])
    assert task.failure is None and len(task.clips) == 2
    assert seen == [1, 1], seen  # FFmpeg applied it to the codec context
    with av.open(io.BytesIO(task.clips[0].mp4)) as c:
        assert sum(1 for _ in c.decode(video=0)) == 30
