"""The energon index of a bucket folder: checked against the shards on disk at every run and rebuilt
when they differ, with energon's own messages surfaced as one-line errors.

A run killed between a shard's rename and ``prepare_dataset`` (or inside it) leaves an index that
lists fewer samples than the shards hold, or a half-written one; energon would read it as it is.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

from vfm_plugins import json_data

from vfm_curator.pipelines.shard_files import shard_keys, shards, split_shards
from vfm_curator.pipelines.shard_split import PREFIXES, split_pattern

META = ".nv-meta"
#: Files a complete index has (energon writes .info.json, index.sqlite, split.yaml; vfm-data dataset.yaml).
INDEX_FILES = ("dataset.yaml", "split.yaml", "index.sqlite", ".info.json")


def disk_counts(folder: Path) -> dict[str, int]:
    """shard file name -> samples in it, for the finished shards of ``folder``."""
    return {s.name: len(shard_keys(s)) for s in shards(folder)}


def indexed_counts(folder: Path) -> dict[str, int] | None:
    """shard file name -> samples, as the index says; None when the index is missing or incomplete."""
    meta = folder / META
    if not all((meta / name).is_file() for name in INDEX_FILES):
        return None
    try:
        info = json_data.loads((meta / ".info.json").read_text(encoding="utf-8"))
        counts = info["shard_counts"]
        return {str(k): int(v) for k, v in counts.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def split_parts(folder: Path) -> list[tuple[str, str]]:
    """The energon split parts of a bucket folder: (split, pattern) for each split that has shards
    there (energon refuses a pattern that matches no shard)."""
    return [(split, split_pattern(split)) for split in PREFIXES if split_shards(folder, split)]


def indexed_splits(folder: Path) -> list[str] | None:
    """The split parts the index names (None: no readable split.yaml)."""
    try:
        from vfm_data.blend_file import read_yaml

        return sorted(str(name) for name in read_yaml(folder / META / "split.yaml")["split_parts"])
    except Exception:  # noqa: BLE001 - unreadable or of another shape: not this run's index
        return None


def index_is_current(folder: Path, on_disk: dict[str, int] | None = None) -> bool:
    """Whether the index lists exactly the shards on disk with their sample counts, in the split
    parts the shards' names give (an index made before val shards existed names train alone)."""
    on_disk = disk_counts(folder) if on_disk is None else on_disk
    return indexed_counts(folder) == on_disk and indexed_splits(folder) == sorted(s for s, _ in split_parts(folder))


def rebuild_index(folder: Path) -> None:
    """Index ``folder`` again from scratch with energon's preparation. Energon prints its reasons to
    stdout and may call ``sys.exit``: both become a ``ValueError`` carrying its text."""
    from vfm_data import prepare_dataset

    shutil.rmtree(folder / META, ignore_errors=True)  # a stale or half-written index is not reused
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            prepare_dataset(folder, split_parts=split_parts(folder))
    except SystemExit as exc:
        raise ValueError(f"energon could not index {folder}: {_said(captured, exc)}") from None
    except (OSError, ValueError, RuntimeError, AssertionError) as exc:
        raise ValueError(f"energon could not index {folder}: {_said(captured, exc)}") from exc


def _said(captured: io.StringIO, exc: BaseException) -> str:
    """Energon's own words (its printed lines, progress bars left out), else the exception's."""
    lines = [ln.strip() for ln in captured.getvalue().replace("\r", "\n").splitlines()]
    lines = [ln for ln in lines if ln and "%|" not in ln and not ln.startswith(("Saving info", "Indexing", "Found "))]
    text = " ".join(lines) if lines else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())


def refresh(folder: Path) -> bool:
    """Rebuild ``folder``'s index unless it matches the shards on disk; returns whether it rebuilt."""
    if not shards(folder) or index_is_current(folder):
        return False
    rebuild_index(folder)
    return True
