"""Windows of a clip already in finished shards must be the windows this run would write, which a
changed ``frame_stride`` breaks without changing the bucket's name: their recorded spans tell. Two
runs meet such windows: a resumed one adding the others of a clip a killed run cut short (its id,
written last, is not there), and one topping up a finished clip after ``windows`` was raised."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from vfm_curator.pipelines.shard_files import shards
from vfm_curator.stages.shard_task import ShardTask


def recorded_spans(folder: Path, keys: set[str]) -> dict[str, tuple[float, float]]:
    """key -> the ``span`` in its sample's json, for ``keys`` in the finished shards of ``folder``."""
    found: dict[str, tuple[float, float]] = {}
    if not keys:
        return found
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


def clip_keys(task: ShardTask, keys: set[str]) -> set[str]:
    """Those of ``keys`` that are the clip's windows under this run's window count."""
    return {task.sample_key(k) for k in range(len(task.latents()))} & keys


def stale_windows(task: ShardTask, spans: dict[str, tuple[float, float]]) -> list[str]:
    """Keys of the clip's windows in ``spans`` (their recorded spans, see :func:`recorded_spans`)
    whose span is not the one this run gives them (made with another ``frame_stride``): writing the
    others would leave frames in no sample, and the same key cannot be written twice."""
    mine = {task.sample_key(k): k for k in range(len(task.latents()))}
    return sorted((key for key in mine if key in spans
                   and any(abs(a - b) > 1e-6 for a, b in zip(spans[key], task.window_span(mine[key])))),
                  key=lambda key: mine[key])


def held_clips(out: Path, finished: dict[str, set[str]], ids: set[str]) -> dict[str, tuple[str, dict[str, tuple[float, float]]]]:
    """Clip id -> (the bucket whose finished shards hold it, the recorded spans of its windows
    there), for the finished clips ``ids`` a raised ``windows`` tops up: one pass over each bucket's
    shards, not one per clip."""
    held: dict[str, tuple[str, dict[str, tuple[float, float]]]] = {}
    for bucket, keys in finished.items():
        here = ids & keys
        owner = {key: key if key in here else key.rpartition("-w")[0] for key in keys}
        spans = recorded_spans(out / bucket, {key for key, clip in owner.items() if clip in here})
        held.update({clip: (bucket, {}) for clip in here})
        for key, span in spans.items():
            held[owner[key]][1][key] = span
    return held
