"""Resume state: one small JSON record per finished video under ``OUT/.state/videos/``.

A video counts as finished once its record exists; the record is written last, after its clips and
metadata part, so a killed run loses nothing that was finished and a half-done video is simply done
again (its clip ids are deterministic, so nothing doubles). ``clips.parquet`` is rebuilt from every
``ok`` record's part at the end of each run: the union of all runs into the folder.

A failed video's record carries ``failure = {stage, reason, cause, kind, attempts, options_hash,
input_stamp}``; :func:`vfm_curator.failures.should_retry` decides whether a later run does it again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable, Iterator

from vfm_plugins import json_data

from vfm_curator.io.paths import atomic_write, output_path, read_text_if_file, safe_join

STATE = ".state"
#: The names a video id may take in file names under ``.state`` (:func:`vfm_curator.tasks.video_id`: 16 hex
#: digits); an id read back from the folder that is not one is passed over, never joined into a path.
VIDEO_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


def record_path(out: str | Path, vid: str) -> Path:
    """The record to read (resolved: a link out of the folder is refused)."""
    return safe_join(out, STATE, "videos", f"{vid}.json")


def part_path(out: str | Path, vid: str) -> Path:
    """The metadata part to read (resolved: a link out of the folder is refused)."""
    return safe_join(out, STATE, "parts", f"{vid}.parquet")


def write_record(out: str | Path, vid: str, record: dict[str, Any]) -> None:
    """Written at its own name (:func:`output_path`): a link planted there (to another video's record,
    or out of the folder) is replaced, never written through."""
    atomic_write(output_path(out, STATE, "videos", f"{vid}.json"), json.dumps(record, sort_keys=True).encode("utf-8"))


def part_written_at(out: str | Path, vid: str) -> Path:
    """The name the video's metadata part is written at (:func:`output_path`, as :func:`write_record`'s:
    not resolved, so a link planted there is replaced, never written through)."""
    return output_path(out, STATE, "parts", f"{vid}.parquet")


def forget_video(out: str | Path, vid: str, moved_to: str, clips: Iterable[str] = ()) -> None:
    """Delete a video's record, then its metadata part (the folder no longer has that video: it was
    clipped again at the path it moved to). Names not resolved: a link there is left alone, never its target.
    First ``.state/moved/<vid>`` names where it went, so the folder still knows it curated that video
    (:func:`was_curated`: ``vfm shard`` takes the old path's samples for this folder's, removed), and
    ``clips``, the ids of its clip files: a run killed before they are deleted leaves them to the end
    of the next (:func:`vfm_curator.io.orphans.remove_forgotten_clips`)."""
    from vfm_plugins.files import remove_leftover

    marker = {"moved_to": moved_to, "clips": sorted(clips)}
    atomic_write(output_path(out, STATE, "moved", vid), json.dumps(marker).encode())
    remove_leftover(output_path(out, STATE, "videos", f"{vid}.json"))
    remove_leftover(output_path(out, STATE, "parts", f"{vid}.parquet"))


def was_curated(out: str | Path, vid: str) -> bool:
    """Whether the folder keeps a record of video ``vid`` (ok or failed) or of its move
    (:func:`forget_video`): one or two stats. A link out of the folder there counts as neither."""
    if was_recurated(out, vid):
        return True
    try:
        return safe_join(out, STATE, "moved", vid).is_file()
    except (OSError, ValueError):
        return False


def was_recurated(out: str | Path, vid: str) -> bool:
    """Whether video ``vid`` has a record (ok or failed), readable or not: a link out of the folder counts as none."""
    try:
        return record_path(out, vid).is_file()
    except (OSError, ValueError):
        return False


def video_record(task: Any, **extra: Any) -> dict[str, Any]:
    """The record of a finished task (ok or failed), with what the retry rule needs on a failure."""
    failure = None
    if task.failure is not None:
        ctx = task.context
        hashes = ctx.get("options_hashes", {})
        failure = {
            **task.failure,
            "attempts": int(ctx.get("attempt", 1)),
            "options_hash": hashes.get(task.failure.get("stage"), hashes.get("*")),
            "input_stamp": ctx.get("input_stamp"),
        }
    extra_failed = {}
    if failure and task.context.get("replaces"):
        # the finished video this one was to replace (moved here, recaptioned): a retry goes on with it
        extra_failed["replaces"] = task.context["replaces"]
    return {
        **extra_failed,
        "video_id": task.vid,
        "source": display_name(task.source),
        "status": "failed" if failure else "ok",
        "failure": failure,
        "duration_s": task.duration,
        "clips": 0,
        "meta": {k: v for k, v in task.meta.items() if k != "cuts"},
        "timings": task.timings,
        # stage -> hash of the options up to it: a later run tells a video made with other options
        "options_hashes": dict(task.context.get("options_hashes") or {}),
        # the attempt that wrote it (its token: vfm_curator.io.attempts), so the driver tells its
        # own attempt's record from one left by an earlier run or attempt
        "attempt_id": task.context.get("fence"),
        # what the input was (stamp, fingerprint, caption digest): vfm_curator.io.fingerprint
        "input": task.context.get("input"),
        **extra,
    }


def record_failure(out: str | Path, task: Any, **extra: Any) -> bool:
    """Write a failed task's record; returns whether the video's finished (ok) record was kept instead.
    A failed redo (``redo_changed``: a changed file, caption or options) replaces nothing: the ok
    record stays, its clips and part with it, and carries the failure as ``redo_failure`` (listed in
    failures.jsonl and the report: :func:`vfm_curator.pipelines.summary.listed_failures`) until a
    redo succeeds, or a run finds nothing left to redo (``vfm_curator.pipelines.clipping._drop_redo_failure``)."""
    failed = video_record(task, **extra)
    finished = finished_record(out, task.vid)
    if finished is not None:
        write_record(out, task.vid, {**finished, "redo_failure": {**failed["failure"], "source": failed["source"]}})
        return True
    write_record(out, task.vid, failed)
    return False


def finished_record(out: str | Path, vid: str) -> dict[str, Any] | None:
    """Video ``vid``'s ok record whose metadata part is there (its clips are in the table), else None.
    An ok record without its part (deleted by hand) is done again as a new video, not redone: its
    failure takes the record's place (:func:`record_failure`): kept beside an ok record that the end of
    a run passes over, it was in neither the table nor failures.jsonl, and every run tried it again."""
    record = load_record(out, vid)
    if record is None or record.get("status") != "ok" or not part_path(out, vid).exists():
        return None
    return record


def display_name(path: str) -> str:
    """``path`` as text that encodes to UTF-8 (bytes that are not UTF-8 shown as ``\\udcXX``, as repr does)."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return path.encode("utf-8", "backslashreplace").decode("utf-8")


def finished(out: str | Path) -> set[str]:
    """Ids of the videos with a record (ok or failed)."""
    folder = safe_join(out, STATE, "videos")
    return {p.stem for p in folder.glob("*.json")} if folder.is_dir() else set()


def records(out: str | Path) -> Iterator[dict[str, Any]]:
    folder = safe_join(out, STATE, "videos")
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            yield json_data.loads(read_text_if_file(path))
        except (OSError, ValueError):  # a record is written atomically; a broken one (or a pipe) means someone edited it
            continue


def load_record(out: str | Path, vid: str) -> dict[str, Any] | None:
    try:
        return json_data.loads(read_text_if_file(record_path(out, vid)))
    except (OSError, ValueError):
        return None


def video_counts(ok: list[dict[str, Any]], failed: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(ok, failed, ok whose redo failed) over the folder's source videos, each counted once. A moved
    video's failed redo is a failed record at its new path whose ``replaces`` names its finished record
    (``vfm_curator.pipelines.summary.listed_failures``): one video, still ok (its earlier clips are kept), not one ok and one
    failed. A finished video whose redo failed in place has one record (its ``redo_failure``)."""
    finished = {r.get("video_id") for r in ok}
    replacing = [r for r in failed if (r.get("replaces") or {}).get("video_id") in finished]
    redone = {r["replaces"]["video_id"] for r in replacing} | {
        r.get("video_id") for r in ok if isinstance(r.get("redo_failure"), dict)}
    return len(ok), len(failed) - len(replacing), len(redone)
