"""sha256 of files, remembered by what ``stat`` says of each, so that a file unchanged since its digest was
taken is not read again (FVD's reference videos: a cache hit read every byte of every video to find its key).

A digest is reused only when the file's device, inode, size, mtime and ctime are all those it had when it was
read. ctime is the part nothing but the kernel sets: ``touch -d`` or ``cp -p`` restore an mtime but give the
file a new ctime, so a file rewritten with the same size and its old mtime is read again. The digests live in
one JSON file (never pickle) that is rewritten whole with the files asked about: a file gone from the set is
forgotten. One that cannot be read as such is one warning and is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path
from typing import Sequence

from vfm_plugins import Notice, json_data

#: a file changed this shortly before its stat was taken could change again within the same timestamp tick and
#: keep its ctime (1 s on ext3, HFS+ and NFSv2, 2 s on FAT): its digest is not trusted, and is taken again the
#: next time (git's "racily clean" files)
RACY_NS = 2_000_000_000
#: the layout of the digests file; another is rebuilt
VERSION = 1
_STAT_FIELDS = ("dev", "ino", "size", "mtime_ns", "ctime_ns")


class DigestCacheWarning(Notice):
    """The file of remembered digests could not be read; it is rebuilt (each file's bytes read once more)."""


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def identity(st: os.stat_result) -> dict[str, int]:
    """What must be the same for a file's remembered digest to be reused."""
    return {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns}


def read_digests(path: Path) -> dict[str, dict]:
    """The entries of the digests file at ``path``: name -> identity, ``checked_ns`` and ``sha256``; {} when there
    is none, and {} with one :class:`DigestCacheWarning` when it is not one (cut short, edited, another version)."""
    try:
        doc = json_data.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return _unreadable(path, f"{type(exc).__name__}: {exc}")
    files = doc.get("files") if isinstance(doc, dict) and doc.get("version") == VERSION else None
    if not isinstance(files, dict) or not all(_well_formed(e) for e in files.values()):
        return _unreadable(path, f"not a version {VERSION} digests file")
    return files


def _well_formed(entry: object) -> bool:
    return (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
            and all(type(entry.get(k)) is int for k in (*_STAT_FIELDS, "checked_ns")))


def _unreadable(path: Path, why: str) -> dict:
    warnings.warn(f"the file digests cache {path} could not be read ({why}); it is rebuilt, reading each file once more",
                  DigestCacheWarning, stacklevel=3)
    return {}


def digests(files: Sequence[Path], names: Sequence[str], cache: Path) -> list[str]:
    """sha256 of each of ``files`` (remembered in ``cache`` under its name in ``names``), reading only the files
    that changed since their digest was taken, or whose digest was taken too soon after a change (RACY_NS).
    ``cache`` is then rewritten with these files alone."""
    known = read_digests(cache)
    entries, out = {}, []
    for path, name in zip(files, names, strict=True):
        checked_ns = time.time_ns()  # before the stat: a change after it has a later ctime, or a racy one
        now = identity(path.stat())
        entry = known.get(name)
        if (entry is None or {k: entry[k] for k in _STAT_FIELDS} != now
                or entry["ctime_ns"] > entry["checked_ns"] - RACY_NS):
            entry = {**now, "checked_ns": checked_ns, "sha256": file_digest(path)}
        entries[name] = entry
        out.append(entry["sha256"])
    if entries != known:
        _write(cache, {"version": VERSION, "files": entries})
    return out


def _write(cache: Path, doc: dict) -> None:
    from vfm_plugins.files import replace_file

    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        replace_file(cache, json.dumps(doc, indent=1) + "\n")
    except OSError as exc:  # a read-only cache folder: the digests are right, only not remembered
        warnings.warn(f"the file digests cache {cache} could not be written ({exc}); each file is read again next time",
                      DigestCacheWarning, stacklevel=3)
