"""Which finished videos of a folder were clipped from given bytes: ``OUT/.state/inputs/<fingerprint>``
holds the ids of the videos whose record keeps that input fingerprint, one a line.

A path the folder has no record of may be a video it clipped, moved or copied
(:mod:`vfm_curator.io.fingerprint`). Looking that up in the records themselves reads every record
of the folder (a million small files near a million videos) whenever a run has one new path; here
it is one small file per new path. The write stage adds a video's line as it writes its record; a
folder made before this index has it built from its records once, on the first run that needs it
(``.built`` marks it complete). A line is a hint: the caller checks the record it names (a record
redone with other bytes, or deleted since, leaves a stale line, never a wrong answer).
"""

from __future__ import annotations

import os
from pathlib import Path

from vfm_curator.io import state
from vfm_curator.io.fingerprint import FORMAT as _FINGERPRINT
from vfm_curator.io.paths import append_line, atomic_write, open_if_file, output_path
from vfm_curator.io.state import VIDEO_ID as _VIDEO_ID

#: An index file lists the ids of a few videos (copies with other captions); more is no file of ours.
_MAX_BYTES = 1 << 16


def _entry(out: str | Path, fp: str) -> Path:
    """Written at its own name (:func:`output_path`): a link planted there is replaced, never appended through."""
    return output_path(out, state.STATE, "inputs", fp)


def note(out: str | Path, fp: str | None, vid: str) -> None:
    """Record that video ``vid`` was clipped from bytes of fingerprint ``fp`` (None: unreadable, no line)."""
    if isinstance(fp, str) and _FINGERPRINT.fullmatch(fp) and _VIDEO_ID.fullmatch(vid) and vid not in videos_with(out, fp):
        _append(out, fp, vid)


def _append(out: str | Path, fp: str, vid: str) -> None:
    path = _entry(out, fp)
    path.parent.mkdir(parents=True, exist_ok=True)
    append_line(path, vid)


def videos_with(out: str | Path, fp: str | None) -> list[str]:
    """Ids of the videos recorded with fingerprint ``fp``, in the order noted (check their records)."""
    if not isinstance(fp, str) or not _FINGERPRINT.fullmatch(fp):
        return []
    fd = open_if_file(_entry(out, fp), os.O_RDONLY)  # a link there is no index file
    if fd is None:
        return []
    with open(fd, "rb") as fh:
        text = fh.read(_MAX_BYTES).decode("ascii", "replace")
    return list(dict.fromkeys(line for line in text.splitlines() if _VIDEO_ID.fullmatch(line)))


def ensure(out: str | Path) -> None:
    """Build the index from the folder's records when it was never completed (a folder made before
    it, or a build killed half-way: lines noted twice are read once). Reads every record, once per folder."""
    marker = output_path(out, state.STATE, "inputs", ".built")
    if marker.is_file() and not marker.is_symlink():
        return
    folder = marker.parent  # resolved (inside the output folder) once, not per record as _entry does
    folder.mkdir(parents=True, exist_ok=True)
    for record in state.records(out):
        kept = record.get("input") or {}
        fp, vid = (kept.get("fingerprint") if isinstance(kept, dict) else None), record.get("video_id")
        if (record.get("status") == "ok" and isinstance(fp, str) and _FINGERPRINT.fullmatch(fp)
                and isinstance(vid, str) and _VIDEO_ID.fullmatch(vid)):
            append_line(folder / fp, vid)  # not read first: a line a killed build wrote twice is read once
    atomic_write(marker, b"")
