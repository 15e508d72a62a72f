"""The attempt fence (vfm_curator.io.attempts): a stage call cancelled for ``run.stage_timeout_s``
can keep running; whatever it reaches later, it must not write over what the driver decided."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from vfm_curator.io import attempts, state
from vfm_curator.pipelines.clipping import _settle
from vfm_curator.stages.decode import DecodeStage
from vfm_curator.stages.split import SplitStage
from vfm_curator.stages.transcode import TranscodeStage
from vfm_curator.stages.write import WriteStage
from vfm_curator.synth import make_video
from vfm_curator.tasks import VideoTask

TIMED_OUT = {"stage": "decode+split+transcode+write", "reason": "no result after 1 s (run.stage_timeout_s); cancelled",
             "cause": "machine", "kind": "timeout"}


def _transcoded(tmp_path: Path, out: Path, token: str | None) -> VideoTask:
    """A video cut into 3 clips and transcoded into ``out``'s staging files: what reaches the write stage."""
    make_video(tmp_path / "v.mp4", [20, 33, 27], seed=1)
    task = VideoTask(str(tmp_path / "v.mp4"))
    task.context = {"attempt": 1, "fence": token}
    for stage in (DecodeStage(), SplitStage(min_clip_s=0.25), TranscodeStage(preset="ultrafast", out=str(out))):
        stage.process([task])
    assert task.failure is None and len(task.clips) == 3, task.failure
    return task


def _written(out: Path) -> list[str]:
    """Everything in the folder but the fences: what a write left."""
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and "attempts" not in p.parts)


def test_an_attempt_the_driver_took_back_writes_nothing_when_its_write_stage_runs_later(tmp_path):
    out = tmp_path / "out"
    task = _transcoded(tmp_path, out, None)
    task.context["fence"] = attempts.open_fence(out, task.vid)
    with attempts.settle(out, task.vid):  # the driver: this call was cancelled (it goes on running)
        pass
    WriteStage(out=str(out)).process([task])
    assert _written(out) == []  # no clip, no thumbnail, no part, no record; its staging files deleted


def test_an_older_attempt_writes_nothing_once_a_newer_one_is_handed_out(tmp_path):
    out = tmp_path / "out"
    old = _transcoded(tmp_path, out, None)
    old.context["fence"] = attempts.open_fence(out, old.vid)
    attempts.open_fence(out, old.vid)  # the video is run again: attempt 2
    WriteStage(out=str(out)).process([old])
    assert _written(out) == []


def test_the_attempt_the_driver_waits_for_writes_its_clips_and_record_as_before(tmp_path):
    out = tmp_path / "out"
    task = _transcoded(tmp_path, out, None)
    token = task.context["fence"] = attempts.open_fence(out, task.vid)
    WriteStage(out=str(out)).process([task])
    record = state.load_record(out, task.vid)
    assert (record["status"], record["clips"], record["attempt_id"]) == ("ok", 3, token)
    assert len(list((out / "clips").glob("*.mp4"))) == 3 and not list((out / "clips").glob(".*.tmp"))


def test_a_failure_no_write_stage_recorded_is_recorded_by_the_driver_as_this_attempts(tmp_path):
    out = tmp_path / "out"
    task = VideoTask(str(tmp_path / "v.mp4"))
    task.context = {"attempt": 1, "fence": attempts.open_fence(out, task.vid)}
    task.failure = dict(TIMED_OUT)
    # a record an earlier run left (same attempt number: --retry restarts them) is not this attempt's
    state.write_record(out, task.vid, {"video_id": task.vid, "status": "failed", "attempt_id": "earlier-run",
                                       "failure": {"cause": "input", "kind": "decode", "attempts": 1}})
    assert _settle(out, task)["kind"] == "timeout"
    record = state.load_record(out, task.vid)
    assert (record["failure"]["kind"], record["attempt_id"]) == ("timeout", task.context["fence"])
    assert not attempts.fence_path(out, task.vid).exists()  # settled: the fence is gone


# A cancelled call that is still inside its write when the driver takes the video back: it holds
# the commit window for a second, writing the video's record as done.
_WRITER = """
import sys, time
from vfm_curator.io import attempts, state
out, vid, token, seconds = sys.argv[1:]
with attempts.commit_window(out, vid, token) as current:
    assert current
    print("writing", flush=True)
    time.sleep(float(seconds))
    state.write_record(out, vid, {"video_id": vid, "status": "ok", "failure": None, "attempt_id": token})
"""


def _writing(out: Path, task: VideoTask, seconds: float) -> subprocess.Popen:
    """A process inside the video's commit window for ``seconds`` (it has said so when this returns)."""
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(out), task.vid, task.context["fence"], str(seconds)],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "writing"
    return writer


def _timed_out(tmp_path: Path) -> tuple[Path, VideoTask]:
    out = tmp_path / "out"
    task = VideoTask(str(tmp_path / "v.mp4"))
    task.context = {"attempt": 1, "fence": attempts.open_fence(out, task.vid)}
    task.failure = dict(TIMED_OUT)  # the driver gave up on the call, which still runs in its worker
    return out, task


def test_the_driver_waits_for_a_write_in_progress_and_keeps_the_video_it_finished(tmp_path):
    out, task = _timed_out(tmp_path)
    writer = _writing(out, task, 1.0)
    try:
        t0 = time.monotonic()
        failure = _settle(out, task)
        waited = time.monotonic() - t0
    finally:
        assert writer.wait(timeout=30) == 0
    assert waited > 0.5  # settled only after the write ended
    assert failure == {}  # done, not failed: the driver does not run it again
    record = json.loads(state.record_path(out, task.vid).read_text())
    assert record["status"] == "ok"  # and not overwritten with the timeout


def test_a_write_stuck_in_its_window_does_not_hang_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(attempts, "SETTLE_WAIT_S", 0.5)
    out, task = _timed_out(tmp_path)
    writer = _writing(out, task, 60.0)  # a worker in a hung write, which the cancel could not end
    try:
        t0 = time.monotonic()
        assert _settle(out, task)["kind"] == "timeout"  # recorded after the bounded wait
        assert time.monotonic() - t0 < 10
    finally:
        writer.kill()
        writer.wait()
    assert state.load_record(out, task.vid)["failure"]["kind"] == "timeout"


def _clipped_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A folder that `vfm curate` finished (two videos, their clip files in clips/)."""
    import vfm_curator

    for seed in (1, 2):
        make_video(tmp_path / "in" / f"v{seed}.mp4", [24], seed=seed)
    out = tmp_path / "out"
    vfm_curator.curate(tmp_path / "in", out, {"run": {"runner": "serial"}})
    return tmp_path / "in", out


def test_a_link_planted_at_the_fences_folder_is_not_followed_when_a_run_clears_its_fences(tmp_path):
    import vfm_curator

    inputs, out = _clipped_folder(tmp_path)
    clips = sorted(p.name for p in (out / "clips").glob("*.mp4"))
    folder = out / ".state" / "attempts"
    folder.rmdir()
    folder.symlink_to("../clips")  # an output folder from elsewhere: a re-run cleared its fences in clips/
    vfm_curator.curate(inputs, out, {"run": {"runner": "serial"}})
    assert sorted(p.name for p in (out / "clips").glob("*.mp4")) == clips
    assert folder.is_dir() and not folder.is_symlink()


def test_a_link_planted_at_a_videos_fence_is_replaced_and_its_target_left_alone(tmp_path):
    import vfm_curator

    inputs, out = _clipped_folder(tmp_path)
    clip = sorted((out / "clips").glob("*.mp4"))[0]
    before = clip.read_bytes()
    make_video(inputs / "v3.mp4", [24], seed=3)  # a video the next run hands out
    vid = VideoTask(str((inputs / "v3.mp4").resolve())).vid
    (out / ".state" / "attempts" / vid).symlink_to(f"../../clips/{clip.name}")
    assert vfm_curator.curate(inputs, out, {"run": {"runner": "serial"}}).processed == 1
    assert clip.read_bytes() == before  # neither truncated to a token nor deleted when the video settled
    assert state.load_record(out, vid)["status"] == "ok"
