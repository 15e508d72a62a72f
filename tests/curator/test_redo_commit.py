"""A video clipped again (``--redo-changed``) into the same clip ids swaps its new files in with one
commit (:mod:`vfm_curator.io.commits`): a write that fails or is killed before the commit leaves the
earlier clips whole and described by their records; one killed after it is finished by the next run.
Real H264 files (PyAV), real failures: a folder that cannot be written, a SIGKILL at a chosen rename."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import vfm_curator
from tests.curator.moved_folder import SERIAL, clip_rows
from tests.format_versions import assert_one_line_naming
from vfm_curator.io import commits, staging
from vfm_curator.io.fingerprint import fingerprint
from vfm_curator.pipelines.clip_table import read_clip_table
from vfm_curator.synth import make_video

# Curates with --redo-changed in a process that SIGKILLs itself right after (or, with "before",
# right before) the first os.replace whose target is under the folder named by argv[3].
KILLED_AT_RENAME = """
import os, signal, sys
import vfm_curator

real = os.replace
folder, when = sys.argv[3], sys.argv[4]

def replace(src, dst, *args, **kwargs):
    target = os.path.basename(os.path.dirname(dst)) == folder and not os.path.basename(dst).startswith(".")
    if target and when == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    real(src, dst, *args, **kwargs)
    if target:
        os.kill(os.getpid(), signal.SIGKILL)

os.replace = replace
vfm_curator.curate(sys.argv[1], sys.argv[2], {"run": {"runner": "serial"}}, redo_changed=True)
"""


def _digests(out: Path) -> dict[str, str]:
    return {p.stem: hashlib.sha1(p.read_bytes()).hexdigest() for p in (out / "clips").glob("*.mp4")}


def _record(out: Path) -> dict:
    [path] = (out / ".state" / "videos").glob("*.json")
    return json.loads(path.read_text())


def _leftovers(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob(".*.tmp")) + sorted(
        p.name for p in (out / ".state" / "commits").glob("*")) if (out / ".state").is_dir() else []


def _curated_then_changed(tmp_path: Path) -> tuple[Path, Path, dict[str, str], list[dict]]:
    """``in/a.mp4`` clipped into 4 clips, then rewritten with other pictures and the same shots (the
    same clip ids). Returns (the input folder, out, the clip files' digests, the clip table)."""
    a = tmp_path / "in" / "a.mp4"
    make_video(a, [24] * 4, seed=1, width=48, height=32)
    out = tmp_path / "out"
    vfm_curator.curate(tmp_path / "in", out, SERIAL)
    digests, table = _digests(out), clip_rows(out)
    make_video(a, [24] * 4, seed=2, width=48, height=32)
    return tmp_path / "in", out, digests, table


def _killed(inputs: Path, out: Path, folder: str, when: str) -> None:
    killed = subprocess.run([sys.executable, "-c", KILLED_AT_RENAME, str(inputs), str(out), folder, when],
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr


def test_a_redo_whose_write_fails_part_way_keeps_every_earlier_clip_file_as_its_record_describes(tmp_path):
    inputs, out, digests, table = _curated_then_changed(tmp_path)
    shutil.rmtree(out / "thumbs")
    (out / "thumbs").write_text("a file where the thumbnails folder was")  # every thumbnail write fails
    redo = vfm_curator.curate(inputs, out, SERIAL, redo_changed=True)
    assert (redo.redone, redo.failures) == (1, 1)
    assert _digests(out) == digests and clip_rows(out) == table  # no new bytes under the kept record
    assert _record(out)["status"] == "ok" and "redo_failure" in _record(out)
    assert _leftovers(out) == []


def test_a_redo_killed_after_its_first_clip_took_its_final_name_is_finished_by_the_next_run(tmp_path):
    inputs, out, digests, _ = _curated_then_changed(tmp_path)
    _killed(inputs, out, "clips", "after")
    assert (out / ".state" / "commits").is_dir()  # killed inside the commit: the next run carries it out
    again = vfm_curator.curate(inputs, out, SERIAL)
    now = _digests(out)
    assert set(now) == set(digests) and all(now[i] != digests[i] for i in digests)  # every clip the new one
    assert _record(out)["input"]["fingerprint"] == fingerprint(str(inputs / "a.mp4"))  # and described as such
    assert (again.skipped, again.changed_inputs) == (1, {})
    assert {r["id"] for r in clip_rows(out)} == set(now) and _leftovers(out) == []


def test_a_redo_killed_before_its_commit_leaves_the_earlier_clips_whole_and_its_files_are_cleaned(tmp_path):
    inputs, out, digests, table = _curated_then_changed(tmp_path)
    _killed(inputs, out, "commits", "before")
    assert any(out.rglob(".*.tmp"))  # the new clips, thumbnails and part were written aside
    assert _digests(out) == digests
    again = vfm_curator.curate(inputs, out, SERIAL)
    assert (again.skipped, again.changed_inputs) == (1, {"file": 1})  # still the old clips: the file changed since
    assert _digests(out) == digests and clip_rows(out) == table and _leftovers(out) == []


def test_a_commit_naming_a_file_outside_the_clip_folders_is_refused_and_nothing_is_renamed(tmp_path):
    inputs, out, digests, _ = _curated_then_changed(tmp_path)
    record = _record(out)
    (out / "clips" / ".x.tmp").write_text("planted")
    commits.commit(out, record["video_id"], [(out / "clips" / ".x.tmp", out / "report.html")], [], record)
    with pytest.raises(ValueError, match="accepted: a commit vfm curate wrote"):
        vfm_curator.curate(inputs, out, SERIAL)
    assert "planted" not in (out / "report.html").read_text() and _digests(out) == digests


def test_vfm_shard_refuses_a_clips_folder_whose_curate_was_killed_inside_a_commit_saying_to_run_it_again(tmp_path):
    """The commit's clip files are the new ones but clips.parquet still lists the old clips (it is
    rebuilt at the end of a run): sharding it would pair the new pictures with the old rows."""
    inputs, out, _, table = _curated_then_changed(tmp_path)
    _killed(inputs, out, "clips", "after")
    with pytest.raises(ValueError) as info:
        vfm_curator.shard(out, tmp_path / "shards")
    assert_one_line_naming(str(info.value), str(out), "run the same vfm curate again")
    assert clip_rows(out) == table  # nothing of the curation was touched
    vfm_curator.curate(inputs, out, SERIAL)  # finishes the commit and rebuilds the table
    assert {t.id for t in read_clip_table(out)} == set(_digests(out))


def test_a_link_at_a_commits_name_is_no_commit_and_is_not_followed(tmp_path):
    """A commit is data in the folder: one linked from elsewhere is neither carried out nor counted
    as pending (vfm shard is not refused for it)."""
    out = tmp_path / "out"
    folder = out / "clips"
    folder.mkdir(parents=True)
    (folder / ".v.c.mp4.x.tmp").write_text("planted")
    commits.commit(tmp_path / "elsewhere", "v", [], [], {"video_id": "v"})  # a well-formed commit, outside
    elsewhere = tmp_path / "elsewhere" / ".state" / "commits" / "v.json"
    elsewhere.write_text(json.dumps({"moves": [["clips/.v.c.mp4.x.tmp", "clips/c.mp4"]], "drop": [],
                                     "record": {"video_id": "v"}}))
    (out / ".state" / "commits").mkdir(parents=True)
    (out / ".state" / "commits" / "v.json").symlink_to(elsewhere)
    assert commits.finish(out, "v") is None and commits.pending_videos(out) == []
    commits.finish_all(out)
    assert not (folder / "c.mp4").exists() and (out / ".state" / "commits" / "v.json").is_symlink()


def test_a_staged_clip_is_synced_to_disk_before_a_commit_names_it(tmp_path, monkeypatch):
    """A written commit outlives a crash of the machine, so the files it names must too (as the files
    written aside are): a staged clip still only in the page cache could be renamed as an empty clip."""
    synced = []
    real_fsync = os.fsync

    def fsync(fd):  # the real fsync, noting which file it made durable
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    staged = tmp_path / "clips" / ".v.c.a1.p1.x.mp4.tmp"
    staged.parent.mkdir()
    staged.write_bytes(b"h264")
    monkeypatch.setattr(os, "fsync", fsync)
    assert staging.staged_file(staged, tmp_path / "clips" / "c.mp4") == staged
    assert staged.stat().st_ino in synced


def test_vfm_shard_refuses_a_clips_folder_whose_curate_was_killed_after_its_commits_before_the_table_was_rebuilt(tmp_path):
    """Every commit is carried out (the clip files are the new ones) but clips.parquet, rebuilt at
    the end of a run, still holds the old clips' rows (captions, embeddings): refused until then."""
    inputs, out, digests, table = _curated_then_changed(tmp_path)
    _killed(inputs, out, "out", "before")  # the first file renamed into OUT itself is the new clips.parquet
    assert commits.pending_videos(out) == [] and clip_rows(out) == table
    assert all(digest != digests[i] for i, digest in _digests(out).items())
    with pytest.raises(ValueError) as info:
        read_clip_table(out)
    assert_one_line_naming(str(info.value), str(out), "clips.parquet", "run the same vfm curate again")
    vfm_curator.curate(inputs, out, SERIAL)
    assert {t.id for t in read_clip_table(out)} == set(digests)


def test_an_output_folder_the_write_stage_cannot_commit_in_stops_a_serial_run_not_blaming_each_video(tmp_path):
    """A built-in stage's error escaping its batch ``process`` (here the write stage's commit: ``.state/commits``
    is a file) is no video's: it was recorded as each video's input error, never redone once the folder is mended."""
    for i in range(2):
        make_video(tmp_path / "in" / f"v{i}.mp4", [20, 33], seed=i)
    out = tmp_path / "out"
    (out / ".state").mkdir(parents=True)
    (out / ".state" / "commits").write_text("not a folder")
    with pytest.raises(FileExistsError, match="commits"):
        vfm_curator.curate(tmp_path / "in", out, {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.25}}})
    assert not (out / "failures.jsonl").exists(), (out / "failures.jsonl").read_text()
