"""Turning ``INPUT...`` (files, directories, globs, jsonl/csv manifests) into a list of sources."""

from __future__ import annotations

import csv
import glob
import json
import os
from dataclasses import dataclass
from pathlib import Path

VIDEO_EXTENSIONS = {
    ".mp4", ".mov", ".mkv", ".avi", ".webm", ".m4v", ".mpg", ".mpeg", ".ts", ".mts", ".flv", ".wmv", ".3gp", ".ogv",
}
MANIFEST_EXTENSIONS = {".jsonl", ".csv"}


@dataclass(frozen=True)
class Source:
    path: str  # resolved absolute path (it may not exist: the run records that as a failure)
    caption: str | None = None


def expand(inputs: list[str]) -> list[Source]:
    """Every source named by ``inputs``, deduplicated, in a stable order.

    A directory contributes its video files (by extension, recursively); a glob its matches; a
    ``.jsonl``/``.csv`` manifest its ``path`` entries (relative to the manifest) and their optional
    ``caption``; any other path is taken as a video as given. Raises ``ValueError`` for an input
    that names nothing (a glob without matches, a missing path) or a manifest without a path column.
    """
    out: dict[str, Source] = {}
    for item in inputs:
        for source in _expand_one(str(item)):
            out.setdefault(source.path, source)
    return list(out.values())


def _expand_one(item: str) -> list[Source]:
    path = Path(item)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in VIDEO_EXTENSIONS)
        return [Source(_resolve(p)) for p in files]
    if path.is_file() and path.suffix.lower() in MANIFEST_EXTENSIONS:
        return read_manifest(path)
    if path.exists():
        return [Source(_resolve(path))]
    if glob.has_magic(item):
        matches = sorted(glob.glob(item, recursive=True))
        if not matches:
            raise ValueError(f"input glob {item!r} matches no file")
        return [s for m in matches if Path(m).is_file() for s in _expand_one(m)]
    raise ValueError(f"input {item!r} does not exist (accepted: video files, directories, globs, .jsonl/.csv manifests)")


def read_manifest(path: Path) -> list[Source]:
    """``.jsonl``: one object per line with ``path`` (or ``video``) and optional ``caption``;
    ``.csv``: a header with a ``path`` column and an optional ``caption`` column."""
    base = path.parent
    rows: list[dict] = []
    if path.suffix.lower() == ".jsonl":
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not a JSON object ({exc})") from exc
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{n}: expected a JSON object with 'path', got {type(row).__name__}")
            rows.append(row)
    else:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    sources = []
    for n, row in enumerate(rows, 1):
        value = row.get("path") or row.get("video")
        if not value:
            raise ValueError(f"{path}: entry {n} has no 'path' (columns/keys: {', '.join(map(str, row))})")
        p = Path(value)
        caption = row.get("caption")
        sources.append(Source(_resolve(p if p.is_absolute() else base / p), caption if caption else None))
    return sources


def _resolve(path: Path) -> str:
    return os.path.abspath(str(path))
