"""The settings a shards folder was made with: a resumed run must match its identity
(``shard_config.json``), and a change of bucket options since the last run is told
(``.state/bucketing.json``)."""

from __future__ import annotations

import json
from pathlib import Path

from vfm_curator.io.paths import atomic_write, safe_join
from vfm_curator.pipelines import shard_state
from vfm_curator.pipelines.shard_config import BUCKETING, IDENTITY, ShardConfig


def _check_identity(out: Path, config: ShardConfig) -> None:
    path = safe_join(out, "shard_config.json")
    mine = json.loads(json.dumps(config.identity()))
    if path.exists():
        theirs = json.loads(path.read_text(encoding="utf-8"))
        diff = sorted(k for k in IDENTITY if theirs.get(k) != mine[k])
        if diff:
            raise ValueError(
                f"{out} holds shards made with other settings ({', '.join(f'{k}: {theirs.get(k)!r} there, {mine[k]!r} now' for k in diff)}); "
                "use the same settings to resume, or a new output folder"
            )
    else:
        atomic_write(path, json.dumps(mine, indent=2, sort_keys=True).encode("utf-8"))


def _bucketing_notice(out: Path, config: ShardConfig, kept: int) -> list[str]:
    """A line when this run's bucket options differ from the last run's into ``out`` while clips
    sharded then are kept (they are not re-bucketed); records this run's options for the next."""
    path = safe_join(out, shard_state.STATE, "bucketing.json")
    mine = json.loads(json.dumps({k: getattr(config, k) for k in BUCKETING}))
    try:
        theirs = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        theirs = None
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(mine, sort_keys=True).encode("utf-8"))
    diff = [k for k in BUCKETING if isinstance(theirs, dict) and theirs.get(k) != mine[k]]
    if not diff or not kept:
        return []
    return [f"{', '.join(f'{k} {theirs.get(k)!r} -> {mine[k]!r}' for k in diff)} since the last run into this folder: the "
            f"{kept} clips sharded before keep their buckets and fitting (only new and failed clips use the new options); "
            "shard into a new folder to re-bucket them all"]
