"""Resume state: one small JSON record per finished video under ``OUT/.state/videos/``.

A video counts as finished (and is skipped on the next run) once its record exists; the record is
written last, after its clips and metadata part, so a killed run loses nothing that was finished
and a half-done video is simply done again (its clip ids are deterministic, so nothing doubles).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from vfm_curator.io.paths import atomic_write, safe_join

STATE = ".state"


def record_path(out: str | Path, vid: str) -> Path:
    return safe_join(out, STATE, "videos", f"{vid}.json")


def part_path(out: str | Path, vid: str) -> Path:
    return safe_join(out, STATE, "parts", f"{vid}.parquet")


def write_record(out: str | Path, vid: str, record: dict[str, Any]) -> None:
    atomic_write(record_path(out, vid), json.dumps(record, sort_keys=True).encode("utf-8"))


def finished(out: str | Path) -> set[str]:
    folder = safe_join(out, STATE, "videos")
    return {p.stem for p in folder.glob("*.json")} if folder.is_dir() else set()


def records(out: str | Path) -> Iterator[dict[str, Any]]:
    folder = safe_join(out, STATE, "videos")
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            yield json.loads(path.read_text(encoding="utf-8"))
        except ValueError:  # a record is written atomically; a broken one means someone edited it
            continue
