"""Failure records of the sharding pipeline: ``SHARDS/.state/failed/<clip id>.json`` per clip that
failed, so a re-run skips it unless :func:`vfm_curator.failures.should_retry` says to do it again.
A clip in a finished shard is done; a clip with neither is (re)done."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterator

from vfm_plugins import json_data

from vfm_curator.failures import input_stamp
from vfm_curator.io.paths import atomic_write, output_path, read_text_if_file, safe_join
from vfm_curator.stages.shard_task import ShardTask

STATE = ".state"


def failure_path(out: Path, clip: str) -> Path:
    """The failure record to read (resolved: a link out of the folder is refused)."""
    return safe_join(out, STATE, "failed", f"{clip}.json")


def _failure_file(out: Path, clip: str) -> Path:
    """The failure record to write or delete: its name is not resolved, so a link planted there is
    replaced or removed, never the file it points to (:func:`output_path`)."""
    return output_path(out, STATE, "failed", f"{clip}.json")


def clip_stamp(task: ShardTask) -> list:
    """What a clip's result depends on besides the config: its file and its row (caption included)."""
    row = json.dumps([task.path, task.caption, task.source, list(task.span), task.fps], sort_keys=True, default=str)
    return [*(input_stamp(task.path) or [None, None]), hashlib.sha1(row.encode("utf-8")).hexdigest()[:16]]


def write_failure(out: Path, task: ShardTask, options_hash: str | None) -> dict[str, Any]:
    record = {**task.failure_record(), "attempts": task.attempt, "options_hash": options_hash,
              "input_stamp": clip_stamp(task)}
    atomic_write(_failure_file(out, task.id), json.dumps(record, sort_keys=True).encode("utf-8"))
    return record


def load_failure(out: Path, clip: str) -> dict[str, Any] | None:
    try:
        return json_data.loads(read_text_if_file(failure_path(out, clip)))
    except (OSError, ValueError):
        return None


def clear_failure(out: Path, clip: str) -> None:
    _failure_file(out, clip).unlink(missing_ok=True)


def failures(out: Path) -> Iterator[dict[str, Any]]:
    folder = safe_join(out, STATE, "failed")
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            yield json_data.loads(read_text_if_file(path))
        except (OSError, ValueError):
            continue
