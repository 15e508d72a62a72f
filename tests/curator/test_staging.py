"""Clips pass from transcode to write as staging files in the output folder, never half-written or
left behind: the same bytes as in memory, cleaned on success, on failure and after a killed worker."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest

import vfm_curator
from vfm_curator.errors import DiskFullError
from vfm_curator.io import staging
from vfm_curator.stages.decode import DecodeStage
from vfm_curator.stages.filter import FilterStage
from vfm_curator.stages.split import SplitStage
from vfm_curator.stages.transcode import TranscodeStage
from vfm_curator.stages.write import WriteStage
from vfm_curator.synth import make_video
from vfm_curator.tasks import Clip, VideoTask


def _split(path: Path) -> VideoTask:
    task = VideoTask(str(path))
    DecodeStage().process([task])
    SplitStage(min_clip_s=0.25).process([task])
    assert task.failure is None and len(task.clips) == 3, task.failure
    return task


def _staging_files(out: Path) -> list[Path]:
    return sorted((out / "clips").glob(".*.tmp")) if (out / "clips").is_dir() else []


def test_staged_clips_and_samples_are_the_in_memory_ones_byte_for_byte(tmp_path):
    make_video(tmp_path / "v.mp4", [20, 33, 27], seed=1, width=128, height=72)
    in_memory, staged = _split(tmp_path / "v.mp4"), _split(tmp_path / "v.mp4")
    TranscodeStage(preset="ultrafast").process([in_memory])
    TranscodeStage(preset="ultrafast", out=str(tmp_path / "out")).process([staged])
    assert staged.failure is None
    for a, b in zip(in_memory.clips, staged.clips):
        assert b.mp4 is None and b.staged is not None and b.samples_file is not None
        assert Path(b.staged).read_bytes() == a.mp4 and b.staged_size == len(a.mp4)
        assert b.__dict__["_samples"] == []  # the task holds paths, not frames
        assert len(b.samples) == len(a.samples) == 3  # read back from the file on access
        assert all(np.array_equal(x, y) for x, y in zip(a.samples, b.samples))
    assert len(_staging_files(tmp_path / "out")) == 2 * len(staged.clips)



def test_staged_clips_are_not_written_through_links_planted_at_the_old_staging_names(tmp_path):
    """The names were ``.<vid>.<clip>.a<attempt>.p<pid>.<suffix>.tmp``: all guessable from the input."""
    make_video(tmp_path / "v.mp4", [20, 33, 27], seed=1, width=128, height=72)
    in_memory, staged = _split(tmp_path / "v.mp4"), _split(tmp_path / "v.mp4")
    TranscodeStage(preset="ultrafast").process([in_memory])
    outside, out = tmp_path / "victim.txt", tmp_path / "out"
    inside = out / "notes.txt"  # a file of the user's in the output folder
    (out / "clips").mkdir(parents=True)
    for victim in (outside, inside):
        victim.write_text("precious")
    for clip, victim in zip(staged.clips, (outside, inside, inside)):
        for suffix in ("mp4", "samples.npz"):
            (out / "clips" / f".{staged.vid}.{clip.id}.a1.p{os.getpid()}.{suffix}.tmp").symlink_to(victim)
    TranscodeStage(preset="ultrafast", out=str(out)).process([staged])
    assert staged.failure is None
    assert outside.read_text() == "precious" and inside.read_text() == "precious"
    assert [Path(c.staged).read_bytes() for c in staged.clips] == [c.mp4 for c in in_memory.clips]
    staging.sweep_all(out)  # a link at a staging name is not the run's file: neither followed nor removed
    assert len(list((out / "clips").iterdir())) == 2 * len(staged.clips) and inside.read_text() == "precious"

def test_a_clip_the_file_ends_inside_leaves_no_staging_file(tmp_path):
    make_video(tmp_path / "v.mp4", [20, 33, 27], seed=2)
    task = _split(tmp_path / "v.mp4")
    last = task.clips.pop()
    task.clips.append(Clip(last.start, last.end + 10, id="past-the-end"))  # the file ends 10 frames early
    out = tmp_path / "out"
    TranscodeStage(preset="ultrafast", out=str(out)).process([task])
    assert len(task.clips) == 2 and "past-the-end" not in [c.id for c in task.clips]
    kept = {Path(p).name for c in task.clips for p in (c.staged, c.samples_file)}
    assert {p.name for p in _staging_files(out)} == kept


def test_a_transcode_stopped_by_a_full_disk_deletes_what_it_staged(tmp_path, monkeypatch):
    make_video(tmp_path / "v.mp4", [20, 33, 27], seed=3)
    task = _split(tmp_path / "v.mp4")

    def full(path, frames):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(staging, "save_samples", full)  # the first clip's mp4 is already staged then
    with pytest.raises(DiskFullError, match="no space left on the device writing"):
        TranscodeStage(preset="ultrafast", out=str(tmp_path / "out")).process([task])
    assert _staging_files(tmp_path / "out") == []


def test_write_moves_kept_clips_into_place_and_deletes_filtered_and_failed_ones(tmp_path):
    out = tmp_path / "out"
    make_video(tmp_path / "a.mp4", [20, 33, 27], seed=4)
    make_video(tmp_path / "b.mp4", [30, 30], seed=5)
    kept, dropped = _split(tmp_path / "a.mp4"), VideoTask(str(tmp_path / "b.mp4"))
    DecodeStage().process([dropped])
    SplitStage(min_clip_s=0.25).process([dropped])
    transcode = TranscodeStage(preset="ultrafast", out=str(out))
    transcode.process([kept, dropped])
    FilterStage(max_duration_s=1.2).process([kept])  # the 33-frame clip (1.375 s) is filtered out
    FilterStage(max_duration_s=0.5).process([dropped])  # every clip filtered: the video fails
    assert dropped.failure is not None and dropped.failure["kind"] == "all-filtered"
    staged = {c.id: Path(c.staged).read_bytes() for c in kept.clips if c.rejected is None}
    assert len(staged) == 2 and len(_staging_files(out)) == 2 * 5

    WriteStage(out=str(out)).process([kept, dropped])

    assert _staging_files(out) == []
    assert {p.stem: p.read_bytes() for p in (out / "clips").glob("*.mp4")} == staged
    # thumbnails of every clip, kept or filtered (the report shows why each was dropped)
    assert len(list((out / "thumbs").glob("*.jpg"))) == 5
    record = json.loads((out / ".state" / "videos" / f"{kept.vid}.json").read_text())
    assert record["clips"] == 2 and len(record["thumbs"]) == 2


def test_a_pipeline_run_leaves_no_staging_file_and_the_same_clips_as_in_memory(tmp_path):
    for i in range(2):
        make_video(tmp_path / "in" / f"v{i}.mp4", [20, 33, 27], seed=10 + i, width=128, height=72)
    config = {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.25}}}
    summary = vfm_curator.curate(tmp_path / "in", tmp_path / "out", config)
    assert summary.failures == 0
    assert not list((tmp_path / "out").rglob("*.tmp"))
    written = {p.stem: p.read_bytes() for p in (tmp_path / "out" / "clips").glob("*.mp4")}
    expected = {}
    for path in sorted((tmp_path / "in").glob("*.mp4")):  # the in-memory transcode of the same spans
        task = _split(path)
        TranscodeStage().process([task])
        expected |= {clip.id: clip.mp4 for clip in task.clips}
    assert len(written) == 6 and written == expected


class CrashOnce(TranscodeStage):
    """The transcode stage, but on the first attempt of the video named ``victim`` its worker process
    dies (no exception: the process is gone) right after the clips are staged. Logs the video's
    staging files before and after each call's work."""

    name = "crash_once"
    defaults = {**TranscodeStage.defaults, "victim": "", "log": ""}

    def process_one(self, task: VideoTask) -> None:
        victim = Path(task.source).name == self.opt["victim"]
        attempt = int(task.context.get("attempt", 1))
        if victim:
            self._log(task, attempt, "before")
        super().process_one(task)
        if victim:
            self._log(task, attempt, "after")
            if attempt == 1:
                os._exit(1)

    def _log(self, task: VideoTask, attempt: int, when: str) -> None:
        files = sorted(p.name for p in Path(self.opt["out"], "clips").glob(f".{task.vid}.*.tmp"))
        with open(self.opt["log"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"attempt": attempt, "when": when, "pid": os.getpid(), "files": files}) + "\n")


def _registered(monkeypatch, name: str, stage: type, summary: str) -> None:
    """``stage`` registered as stage ``name`` for this test (replacing a built-in of that name), and this
    test module pickled by value: the Ray workers cannot import it."""
    import ray.cloudpickle

    from vfm_curator.plugins import host

    ray.cloudpickle.register_pickle_by_value(__import__(__name__))
    stages = dict(dict(host._load())["stages"])
    stages[name] = stages["write"].__class__("stages", name, stage, "tests", "0", summary)
    monkeypatch.setitem(host._entries, "stages", stages)


def test_a_killed_worker_s_staging_files_are_gone_before_the_video_is_done_again(tmp_path, ray_session, monkeypatch):
    _registered(monkeypatch, "crash_once", CrashOnce, "kills its worker once")
    for i in range(3):
        make_video(tmp_path / "in" / f"v{i}.mp4", [20, 33, 27], seed=20 + i, width=96, height=64)
    log = tmp_path / "log.jsonl"
    config = {"stages": ["decode", "split", "crash_once", "write"],
              "options": {"crash_once": {"victim": "v1.mp4", "log": str(log), "preset": "ultrafast"},
                          "split": {"min_clip_s": 0.25}},
              "run": {"runner": "ray", "max_attempts": 2}}

    summary = vfm_curator.curate(tmp_path / "in", tmp_path / "out", config)

    calls = [json.loads(line) for line in log.read_text().splitlines()]
    died = [c for c in calls if c["attempt"] == 1 and c["when"] == "after"]
    # the worker died twice (Ray re-runs a call once), each time with 3 clips staged (mp4 + samples);
    # the re-run found the first one's files beside its own (different names: no reuse, no clash)
    assert [len(c["files"]) for c in died] == [6, 12], calls
    assert len({c["pid"] for c in died}) == 2
    # the next attempt started clean: the dead calls' staging files were swept when the task came back
    again = [c for c in calls if c["attempt"] == 2]
    assert [(c["when"], len(c["files"])) for c in again] == [("before", 0), ("after", 6)], calls
    assert all(".a2." in name for name in again[1]["files"])
    assert (summary.failures, summary.retried) == (0, 0)
    assert len(list((tmp_path / "out" / "clips").glob("*.mp4"))) == 9
    assert not list((tmp_path / "out").rglob("*.tmp"))


def test_a_run_sweeps_leftover_temporary_files_but_not_a_link_planted_at_such_a_name(tmp_path):
    make_video(tmp_path / "in" / "v.mp4", [20, 33], seed=6)
    out = tmp_path / "out"
    (out / "clips").mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (out / "clips" / ".v.c.a1.p1.k2x9q7ab.mp4.tmp").write_bytes(b"half a clip")  # a killed run's leftover
    (out / "clips" / ".v.c.a1.p2.mp4.tmp").symlink_to(victim)
    summary = vfm_curator.curate(tmp_path / "in", out, {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.25}}})
    assert summary.failures == 0 and victim.read_text() == "precious"
    assert [p.name for p in (out / "clips").glob(".*.tmp")] == [".v.c.a1.p2.mp4.tmp"]


class DieBeforeCommit(WriteStage):
    """The write stage, but on the first attempt of the video named ``victim`` its worker process dies
    after the video's thumbnails and metadata part are written aside and before its commit."""

    name = "write"  # a clipping run ends with the stage named write
    defaults = {**WriteStage.defaults, "victim": ""}

    def _write_aside(self, task: VideoTask, aside) -> None:
        super()._write_aside(task, aside)
        if Path(task.source).name == self.opt["victim"] and int(task.context.get("attempt", 1)) == 1:
            os._exit(1)


def test_a_worker_killed_before_its_commit_leaves_no_aside_file_once_its_run_ends(tmp_path, ray_session, monkeypatch):
    """The aside files of a write stage killed before its commit (``thumbs/.<vid>.*.tmp``,
    ``.state/parts/.<vid>.*.tmp``) are gone at the end of the run, not only at the start of the next."""
    _registered(monkeypatch, "write", DieBeforeCommit, "kills its worker before its commit once")
    for i in range(2):
        make_video(tmp_path / "in" / f"v{i}.mp4", [20, 33], seed=40 + i, width=96, height=64)
    config = {"stages": ["decode", "split", "transcode", "write"],
              "options": {"write": {"victim": "v1.mp4"}, "transcode": {"preset": "ultrafast"},
                          "split": {"min_clip_s": 0.25}},
              "run": {"runner": "ray", "max_attempts": 2}}

    summary = vfm_curator.curate(tmp_path / "in", tmp_path / "out", config)

    assert (summary.failures, summary.clips) == (0, 4)  # the victim's second attempt wrote its clips
    assert len(list((tmp_path / "out" / "thumbs").glob("*.jpg"))) == 4
    assert not list((tmp_path / "out").rglob("*.tmp"))


def test_a_videos_sweep_takes_its_aside_files_but_never_one_a_written_commit_names(tmp_path):
    from vfm_curator.io import commits

    out, vid = tmp_path.resolve() / "out", "0123456789abcdef"
    named = commits.write_aside(out / "thumbs" / "c1.jpg", vid, b"thumb of a commit not carried out yet")
    dead = [commits.write_aside(out / "thumbs" / "c2.jpg", vid, b"a killed attempt's thumb"),
            commits.write_aside(out / ".state" / "parts" / f"{vid}.parquet", vid, b"a killed attempt's part")]
    other = commits.write_aside(out / "thumbs" / "c3.jpg", "fedcba9876543210", b"another video's")
    commits.commit(out, vid, [(named, out / "thumbs" / "c1.jpg")], [], {"video_id": vid})
    assert staging.sweep(out, vid) == 2
    assert named.exists() and other.exists() and not any(p.exists() for p in dead)
