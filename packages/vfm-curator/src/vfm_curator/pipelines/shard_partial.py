"""A clip cut short by a killed run left some of its windows in finished shards (its id, written
last, is not there). A resumed run adds the others; the ones there must be the windows this run
would write, which a changed ``frame_stride`` breaks without changing the bucket's name: their
recorded spans tell."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from vfm_curator.pipelines.shard_files import shards
from vfm_curator.stages.shard_task import ShardTask


def recorded_spans(folder: Path, keys: set[str]) -> dict[str, tuple[float, float]]:
    """key -> the ``span`` in its sample's json, for ``keys`` in the finished shards of ``folder``."""
    found: dict[str, tuple[float, float]] = {}
    for shard in shards(folder):
        with tarfile.open(shard, "r") as tar:
            for member in tar:
                key, _, ext = member.name.partition(".")
                if ext == "json" and key in keys:
                    span = json.loads(tar.extractfile(member).read()).get("span") or (0.0, 0.0)
                    found[key] = (float(span[0]), float(span[1]))
        if len(found) == len(keys):
            break
    return found


def stale_windows(task: ShardTask, folder: Path, done: set[str]) -> list[str]:
    """Keys of the clip's windows already in ``folder``'s finished shards whose span is not the one
    this run gives them (made with another ``frame_stride``): writing the others would leave frames
    in no sample, and the same key cannot be written twice."""
    mine = {task.sample_key(k): k for k in range(len(task.latents()))}
    there = {key for key in mine if key in done}
    if not there or task.id in done:
        return []
    spans = recorded_spans(folder, there)
    return sorted((key for key in there if key in spans
                   and any(abs(a - b) > 1e-6 for a, b in zip(spans[key], task.window_span(mine[key])))),
                  key=lambda key: mine[key])
