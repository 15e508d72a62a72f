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


def test_decoding_threads_follow_omp_num_threads_and_the_frames_do_not_change(tmp_path, monkeypatch):
    import os

    import numpy as np

    from vfm_curator.io.video import iter_frames

    make_video(tmp_path / "d.mp4", [40, 40], seed=3, width=320, height=192)

    def decode() -> tuple[list, int]:
        frames, most = [], 0
        for _, frame in iter_frames(str(tmp_path / "d.mp4"), width=64, height=38):
            frames.append(frame)
            most = max(most, len(os.listdir("/proc/self/task")))  # OS threads of this process now
        return frames, most

    # one thread first: FFmpeg keeps a codec's worker threads alive after the container closes
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # a Ray worker's 1-CPU call
    one, threads_one = decode()
    monkeypatch.delenv("OMP_NUM_THREADS")
    auto, threads_auto = decode()
    if (os.cpu_count() or 1) > 1:  # FFmpeg's own choice: a decoding thread per core and one more
        assert threads_auto >= threads_one + 2
    assert len(one) == len(auto) == 80 and all(np.array_equal(a, b) for a, b in zip(one, auto))
