"""Clips that changed in the clip table since they were sharded, and sharded clips the table no
longer lists: a re-run names them, and with ``redo_changed`` takes their samples out of the shards
so that the changed ones are sharded again.

A clip is done once its id is in a finished shard, so without this a clip re-curated in place
(``vfm curate --redo-changed``: a replaced file cut at the same span keeps its id) or given a
caption after it was sharded kept its old samples, and a clip the curator dropped since (dedup,
caption QA, a new cut) stayed in the shards that training reads.

What each clip was when it was sharded is kept out of the shards (which stay byte-for-byte the
same for the same clips and options): one line per clip written, ``{"id", "stamp", "source"}`` and
where its samples went (``video_id``, ``split_key``, ``split``: :mod:`.shard_pins`), appended
to ``SHARDS/.state/sharded.jsonl``, the stamp being :func:`ledger_stamp` (the clip file's size,
modification time and byte fingerprint, and a digest of its row, caption included; not its path,
so a clips folder moved or copied elsewhere holds the same clips). A clip without a line (sharded
before this ledger, or by a run killed before it wrote one) is taken as unchanged.

Taking samples out rewrites each shard that holds one without its members (the same members
otherwise, in the same order; atomic per shard; a shard left with none is deleted) in two passes:
first every window but a clip's first, then the first windows, whose key is the clip id. A run
killed in between leaves each clip either done with its old windows (found changed again next
time) or not done and without old windows (sharded anew): never a new clip beside its old windows.
A bucket's energon index is deleted once a shard of it is rewritten, and built again at the run's end.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tarfile
from pathlib import Path
from typing import Iterable, Iterator

from vfm_curator.failures import input_stamp
from vfm_curator.io.fingerprint import fingerprint
from vfm_curator.io.paths import append_line, open_if_file, safe_join
from vfm_curator.pipelines.shard_files import bucket_dirs, shards
from vfm_curator.pipelines.shard_index import META
from vfm_curator.pipelines.shard_state import STATE, clip_stamp
from vfm_curator.stages.shard_task import ShardTask
from vfm_plugins.files import rename_into_place, temporary_file

_WINDOW = re.compile(r"(.+)-w(\d+)")


def ledger_stamp(task: ShardTask) -> list:
    """[size, mtime_ns, byte fingerprint, row digest] of a clip (:mod:`vfm_curator.io.fingerprint`)."""
    return [*_stat(task.path), fingerprint(task.path), _row_digest(task)]


def _stat(path: str) -> list:
    return input_stamp(path) or [None, None]


def _row_digest(task: ShardTask) -> str:
    """The row's fields a sample is made from, but the clip's path (the folder may have moved)."""
    row = json.dumps([task.caption, task.source, list(task.span), task.fps], sort_keys=True, default=str)
    return hashlib.sha1(row.encode("utf-8")).hexdigest()[:16]


def _changed(kept: list, task: ShardTask) -> bool:
    """Whether ``task``'s clip differs from the one whose stamp is ``kept``: its row, else its file's
    size, else (a file touched or copied: another mtime) its bytes; a cheap stat when nothing moved."""
    if len(kept) == 3:  # a line of the first ledger (0.1.0 pre-releases): its stamp held the clip's path
        return kept != clip_stamp(task)
    size, mtime, digest, row = kept
    if row != _row_digest(task):
        return True
    now = _stat(task.path)
    if now[0] != size:
        return True
    return now[1] != mtime and fingerprint(task.path) != digest


def ledger_path(out: Path) -> Path:
    """Not resolved at its own name: a link planted there is never followed (:func:`note_sharded`)."""
    return safe_join(out, STATE) / "sharded.jsonl"


#: A ledger line is an id and a short stamp; a longer one is no line this module wrote.
_LINE_BYTES = 4096


def note_sharded(out: Path, task: ShardTask, split: str | None = None) -> None:
    """Record what ``task``'s clip was as its samples are written, and the split part they went to
    with its video's id and split key (what :mod:`.shard_pins` keeps its videos on one side by).
    Appended with ``O_NOFOLLOW``: a link at the ledger's name (``sharded.jsonl -> ../<bucket>/shard-000000.tar``)
    is replaced by a new ledger, its target untouched (:func:`vfm_curator.io.paths.append_line`)."""
    path = ledger_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    where = {"video_id": task.video_id, "split_key": task.split_key, "split": split} if split else {}
    append_line(path, json.dumps({"id": task.id, "stamp": ledger_stamp(task), "source": task.source, **where}))


def sharded_stamps(out: Path) -> dict[str, list]:
    """clip id -> its stamp when last sharded (later lines win)."""
    return {clip: entry["stamp"] for clip, entry in ledger_entries(out).items()}


def ledger_entries(out: Path) -> dict[str, dict]:
    """clip id -> its last ledger line (``stamp``; ``source``, and ``video_id``, ``split_key`` and
    ``split``, in lines written since each was kept: :mod:`.shard_pins` reads them). A line that is not an id and a stamp (cut by a kill, or garbage: not UTF-8, too long,
    nested past what json parses) is skipped; read line by line through ``O_NOFOLLOW`` (a link
    there is no ledger)."""
    entries: dict[str, dict] = {}
    fd = open_if_file(ledger_path(out), os.O_RDONLY)
    if fd is None:
        return entries
    with open(fd, "rb") as fh:
        for line in _lines(fh):
            try:
                entry = json.loads(line.decode("utf-8"))
                if isinstance(entry["id"], str) and isinstance(entry["stamp"], list) and len(entry["stamp"]) in (3, 4):
                    entries[entry["id"]] = entry
            except (ValueError, KeyError, TypeError, RecursionError):
                continue
    return entries


def _lines(fh) -> Iterator[bytes]:
    """The lines of ``fh`` no longer than ``_LINE_BYTES``, each read in bounded memory: a longer one
    (garbage, or a file with no newline at all) is passed over in pieces, never held whole."""
    while line := fh.readline(_LINE_BYTES + 1):
        if len(line) <= _LINE_BYTES:
            yield line
            continue
        while line and not line.endswith(b"\n"):
            line = fh.readline(1 << 16)


def clip_of(key: str) -> str:
    """The clip id of a sample key (``<id>`` or ``<id>-w<k>``)."""
    match = _WINDOW.fullmatch(key)
    return match.group(1) if match else key


def changed_and_removed(out: Path, tasks: Iterable[ShardTask], done: set[str],
                        clips_dir: Path | None = None) -> tuple[set[str], set[str]]:
    """(ids of the table's clips in finished shards that changed since, ids of sharded clips the
    table no longer lists although their video is one ``clips_dir`` curated: re-cut, deduplicated or
    dropped). The folder's videos are those the table has clips of, those its review took clips out
    of (:func:`review_sources`) and those it keeps a record of (:func:`has_record`): a video whose
    every clip dedup took out is gone from the table, not from the folder. A sharded clip of a video the folder never
    curated is another clip table's (several curated folders may be sharded into one folder), and
    one without a recorded video is unknown: neither counts as removed."""
    ledger = ledger_entries(out)
    table = {t.id: t for t in tasks}
    changed = {i for i, t in table.items() if i in done and i in ledger and _changed(ledger[i]["stamp"], t)}
    sources = {t.source for t in tasks}
    gone = {clip for clip in {clip_of(key) for key in done} - set(table) if clip in ledger}
    others = {ledger[clip].get("source") for clip in gone} - sources
    if others and clips_dir is not None:
        reviewed = review_sources(clips_dir)
        sources |= {s for s in others if isinstance(s, str) and (s in reviewed or has_record(clips_dir, s))}
    return changed, {clip for clip in gone if ledger[clip].get("source") in sources}


def review_sources(clips_dir: Path) -> set[str]:
    """Sources of the clips that ``clips_dir``'s review (dedup, caption QA) took out of its table
    (``review.jsonl``); a line that is not such an entry is passed over."""
    from vfm_curator.io.report_review import REVIEW_FILE

    found: set[str] = set()
    try:
        fh = open(clips_dir / REVIEW_FILE, "rb")
    except OSError:  # none: a table made without a review, or a folder copied without it
        return found
    with fh:
        for line in _lines(fh):
            try:
                entry = json.loads(line.decode("utf-8"))
                if entry.get("action") == "removed" and isinstance(entry["source"], str):
                    found.add(entry["source"])
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
                continue
    return found


def has_record(clips_dir: Path, source: str) -> bool:
    """Whether ``clips_dir`` keeps a record of the video ``source`` (ok or failed), or of its move to
    another path (clipped again there), although its table lists no clip of it."""
    from vfm_curator.io.state import was_curated
    from vfm_curator.tasks import video_id

    return was_curated(clips_dir, video_id(source))


def drop_clips(out: Path, clips: set[str]) -> int:
    """Take every sample of ``clips`` out of the shards of ``out``; returns how many samples."""
    if not clips:
        return 0
    later = lambda key: clip_of(key) in clips and key not in clips  # noqa: E731  (windows after the first)
    first = lambda key: key in clips  # noqa: E731
    return sum(_drop_keys(folder, pick) for pick in (later, first) for folder in bucket_dirs(out))


def _drop_keys(folder: Path, pick) -> int:
    from vfm_data.writer import temporary_prefix

    dropped = 0
    for shard in shards(folder):
        with tarfile.open(shard, "r:") as tar:
            members = tar.getmembers()
            gone = {m.name.split(".", 1)[0] for m in members if pick(m.name.split(".", 1)[0])}
            if not gone:
                continue
            dropped += len(gone)
            kept = [m for m in members if m.name.split(".", 1)[0] not in gone]
            (folder / f"{shard.name}.idx").unlink(missing_ok=True)  # energon's offsets into the old tar
            if not kept:
                shard.unlink()
                continue
            tmp = temporary_file(folder, prefix=temporary_prefix(shard.name), suffix="")  # a kill's leftover is swept
            with tarfile.open(tmp, "w", format=tar.format) as rewritten:
                for member in kept:
                    rewritten.addfile(member, tar.extractfile(member) if member.isfile() else None)
        rename_into_place(tmp, shard, durable=True)
    if dropped:  # the index is of the old tars: gone, so the run's end indexes the bucket anew (also
        # where new shards take the numbers and counts of deleted ones, which a count check would pass)
        shutil.rmtree(folder / META, ignore_errors=True)
    return dropped
