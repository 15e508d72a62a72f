"""A video moved and recaptioned since it was clipped is one video: clipped again in place of its
old record (``redo_changed``) it is in the table once, also when its first attempts at the new path
died before the write stage; two copies of it are one changed video; and a run killed between
forgetting the old record and writing the new leaves no clip file that no record names (the next
run removes them). Real H264 files (PyAV), real runs; the kill is a real SIGKILL of a curating
process at that step."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import vfm_curator
from tests.curator.moved_folder import SERIAL, clip_rows, moved_and_recaptioned
from vfm_curator.synth import make_video


def _clip_files(out: Path) -> set[str]:
    return {p.stem for p in (out / "clips").glob("*.mp4")}


def test_a_moved_recaptioned_video_whose_attempts_died_before_the_write_stage_is_in_the_table_once(tmp_path, ray_session):
    moved, out, clips = moved_and_recaptioned(tmp_path)
    # every stage call takes longer than 1 ms: the attempt times out (cause machine) before the write stage
    tight = {"run": {"runner": "ray", "stage_timeout_s": 0.001, "max_attempts": 1}}
    died = vfm_curator.curate(moved, out, tight, redo_changed=True)
    assert (died.failures, died.failure_kinds["timeout"]["count"]) == (1, 1)
    redo = vfm_curator.curate(moved, out, {"run": {"runner": "ray"}})  # max_attempts 3: the timed-out video again
    assert (redo.retried, redo.failures) == (1, 0)
    table = clip_rows(out)
    a_rows = [r for r in table if r["source"].endswith("a.mp4")]
    assert len(table) == clips and len(a_rows) == 2  # not the old path's two clips beside the new ones
    assert {(r["source"], r["caption"]) for r in a_rows} == {(str(moved.resolve() / "a.mp4"), "a red square moves left")}
    assert _clip_files(out) == {r["id"] for r in table}


def test_two_copies_of_a_moved_recaptioned_video_count_as_one_changed_video(tmp_path):
    moved, out, _ = moved_and_recaptioned(tmp_path)
    shutil.copy(moved / "a.mp4", moved / "a copy.mp4")
    (moved / "a copy.txt").write_text("a red square moves left")
    again = vfm_curator.curate(moved, out, SERIAL)
    assert again.changed_inputs == {"caption": 1}
    assert "1 finished video changed since it was clipped (caption changed 1)" in again.changed_inputs_line()


# Runs the curation in a process that SIGKILLs itself right after the write stage forgot the moved
# video's record and before it wrote the new one: the crash the write stage's order has to survive.
KILLED_AFTER_FORGET = """
import os, signal, sys
import vfm_curator
import vfm_curator.stages.write as write

forget = write.forget_video

def forget_then_die(*args, **kwargs):
    forget(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)

write.forget_video = forget_then_die
vfm_curator.curate(sys.argv[1], sys.argv[2], {"run": {"runner": "serial"}}, redo_changed=True)
"""


def test_a_run_killed_between_forgetting_a_moved_video_and_writing_it_leaves_no_orphan_clip_after_the_next(tmp_path):
    moved, out, clips = moved_and_recaptioned(tmp_path)
    old_ids = {r["id"] for r in clip_rows(out) if r["source"].endswith("a.mp4")}
    killed = subprocess.run([sys.executable, "-c", KILLED_AFTER_FORGET, str(moved), str(out)],
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    records = [json.loads(p.read_text()) for p in (out / ".state" / "videos").glob("*.json")]
    named = {r["video_id"] for r in records}
    assert old_ids <= _clip_files(out) and len(named) == 1  # the old a's clips are there, its record is not
    again = vfm_curator.curate(moved, out, SERIAL, redo_changed=True)
    table = clip_rows(out)
    assert len(table) == clips and again.orphans_removed == len(old_ids)
    assert _clip_files(out) == {r["id"] for r in table}  # no clip file that no record names
    assert not any((out / "thumbs" / f"{i}.jpg").exists() for i in old_ids)
    assert {r["caption"] for r in table if r["source"].endswith("a.mp4")} == {"a red square moves left"}


def test_the_end_of_a_run_deletes_only_the_clips_of_videos_it_forgot_never_other_files_in_clips(tmp_path):
    """A file in ``clips/`` that the table does not name is not the run's to delete unless it is a
    clip of a video the folder forgot (moved, clipped again): a file a user put there, one named like
    a clip, and the clips of a finished video whose metadata part is gone this run all stay."""
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    out = tmp_path / "out"
    vfm_curator.curate(tmp_path / "in", out, SERIAL)
    ids = {r["id"] for r in clip_rows(out)}
    (out / "clips" / "holiday.mp4").write_bytes(b"a user's own file")
    (out / "clips" / ("0" * 20 + ".mp4")).write_bytes(b"named like a clip, by nothing this folder forgot")
    next((out / ".state" / "parts").glob("*.parquet")).unlink()  # its video's clips are not in the table this run
    again = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert again.orphans_removed == 0
    assert _clip_files(out) == ids | {"holiday", "0" * 20}


def test_a_finished_video_whose_redo_died_before_the_write_stage_keeps_its_clips_and_its_table_rows(tmp_path, ray_session):
    """The failed redo (its call timed out: the driver records it) replaces nothing: the ok record
    stays, with the failure beside it, so the table still names its clips and the end of the run
    leaves their files."""
    make_video(tmp_path / "in" / "a.mp4", [24, 48, 24], seed=1)
    out = tmp_path / "out"
    vfm_curator.curate(tmp_path / "in", out, SERIAL)
    ids = {r["id"] for r in clip_rows(out)}
    tight = {"run": {"runner": "ray", "stage_timeout_s": 0.001, "max_attempts": 1}, "options": {"split": {"min_clip_s": 1.5}}}
    died = vfm_curator.curate(tmp_path / "in", out, tight, redo_changed=True)
    assert (died.redone, died.failures, died.clips, died.orphans_removed) == (1, 1, len(ids), 0)
    assert died.failure_kinds["timeout"]["count"] == 1
    assert _clip_files(out) == ids == {r["id"] for r in clip_rows(out)}
