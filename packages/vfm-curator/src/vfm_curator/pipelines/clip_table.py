"""Reading ``vfm curate``'s clip table (``clips.parquet``) as sharding tasks, refusing a table with a
row vfm curate never writes before any clip is worked on."""

from __future__ import annotations

import math
import re
from pathlib import Path

from vfm_plugins import json_data

from vfm_curator.io.commits import check_table_current
from vfm_curator.io.metadata import table_format
from vfm_curator.io.paths import safe_join
from vfm_curator.io.state_format import check_state_format
from vfm_curator.stages.shard_task import ShardTask


def read_clip_table(clips_dir: Path) -> list[ShardTask]:
    """One task per row of ``clips_dir/clips.parquet`` (``vfm curate``'s output); a row's ``path``
    is relative to ``clips_dir`` and may name an image file (a 1-frame sample)."""
    import pyarrow.parquet as pq

    table_path = clips_dir / "clips.parquet"
    if not clips_dir.exists():
        raise ValueError(f"{clips_dir} does not exist; expected the output folder of `vfm curate` (clips/ + clips.parquet)")
    if not table_path.is_file():
        raise ValueError(f"{clips_dir} has no clips.parquet; expected the output folder of `vfm curate`")
    # a curation a newer vfm made: its records (which clips a moved video left, ...) may mean something else
    check_state_format(clips_dir)
    check_table_current(clips_dir)  # a curate killed in or after a redo's commit: the table lists the old clips
    try:
        # the footer only: a newer or foreign table is refused before its rows are read (a large one, or
        # one whose columns this version cannot even read, failed as "cannot read" instead)
        footer = pq.read_schema(table_path)
    except Exception as exc:  # pyarrow raises several types for a broken file
        raise ValueError(f"cannot read {table_path} as a parquet table: {exc}") from exc
    table_format(footer, str(table_path))  # before any row: a newer table's columns may mean something else
    try:
        rows = pq.read_table(table_path).to_pylist()
    except Exception as exc:
        raise ValueError(f"cannot read {table_path} as a parquet table: {exc}") from exc
    tasks = []
    for i, row in enumerate(rows):
        if not row.get("id") or not row.get("path"):
            raise ValueError(f"{table_path}: a row lacks 'id' or 'path' ({ {k: row.get(k) for k in ('id', 'path')} })")
        tasks.append(_task(table_path, i, row, clips_dir))
    _refuse_window_keys(table_path, [t.id for t in tasks])
    return tasks


def curation_failures(clips_dir: Path) -> dict[str, int]:
    """Reason kind -> how many videos of ``vfm curate``'s folder gave no clip (its failures.jsonl),
    most first; {} without that file. Read when the clip table is empty, to say why it is."""
    counts: dict[str, int] = {}
    path = clips_dir / "failures.jsonl"
    if not path.is_file():
        return counts
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                kind = json_data.loads(line).get("kind") or "error"
            except (ValueError, AttributeError):  # a line edited by hand still counts as a failed video
                kind = "error"
            counts[str(kind)] = counts.get(str(kind), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


_WINDOW_KEY = re.compile(r"^(.+)-w[0-9]+$")


def _refuse_window_keys(table_path: Path, ids: list[str]) -> None:
    """Clip ``X``'s later windows are the samples ``X-w1``, ``X-w2``, ... (ShardTask.sample_key): a
    table listing both ``X`` and such an id would write two samples under one key (vfm curate's ids
    are hashes, never of that form)."""
    known = set(ids)
    for clip in ids:
        match = _WINDOW_KEY.match(clip)
        if match and match.group(1) in known:
            raise ValueError(f"{table_path}: clip id {clip!r} is the key of the second or later window of clip "
                             f"{match.group(1)!r} (windows of a clip are keyed <id>-w<k>); rename one of them")


#: A clip id is a sample key in the shards and a file name under .state/ (vfm_data.writer's rule).
_CLIP_ID = re.compile(r"^[A-Za-z0-9_\-]+$")


def _task(table_path: Path, i: int, row: dict, clips_dir: Path) -> ShardTask:
    """Row ``i`` of the clip table as a task; a table is data from elsewhere, so a row vfm curate never
    writes (an id that is no sample key, a path leaving the folder, a non-finite number) refuses the
    whole table naming the row and what is accepted, before any clip is worked on (such a row stopped
    the run mid-way, dropping the open shards)."""
    where = f"{table_path} row {i} (id {row['id']!r})"
    if not isinstance(row["id"], str) or not _CLIP_ID.match(row["id"]):
        raise ValueError(f"{where}: the id is not a sample key; accepted: letters, digits, '_' and '-' (no dots or slashes)")
    try:
        path = safe_join(clips_dir, str(row["path"]))
    except ValueError:
        raise ValueError(f"{where}: path {row['path']!r} leaves the clips folder {clips_dir} (links followed); accepted: "
                         "a clip file inside it, relative to it") from None
    numbers = {k: float(row.get(k) or 0.0) for k in ("fps", "start_s", "end_s")}
    bad = [f"{k} = {v}" for k, v in numbers.items() if not math.isfinite(v) or v < 0]
    if bad:
        raise ValueError(f"{where}: {', '.join(bad)}; accepted: finite numbers >= 0")
    return ShardTask(
        id=row["id"], path=str(path), source=row.get("source") or "", video_id=str(row.get("video_id") or ""),
        caption=row.get("caption") or None, caption_by=dict(row.get("caption_by") or []),
        fps=numbers["fps"], span=(numbers["start_s"], numbers["end_s"]),
    )
