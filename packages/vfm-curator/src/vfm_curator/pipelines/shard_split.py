"""Which split a clip's samples go to (``val_fraction``): a function of the content of the clip's source
video alone (:func:`split_key`), so every clip of a video and every window of a clip stay in one split
(neighbouring shots share scene, people and lighting: a held-out shot beside a trained one measures
recall, not generalisation), and nothing moves between train and val on a re-run or top-up, whatever
the order or the worker count, nor when the video is moved, renamed or curated again elsewhere (its
``video_id`` is a hash of its path; the split key is one of its bytes). Each split has its own shard
name prefix in a bucket folder, and the bucket's energon split parts list a prefix only where it has
shards (energon refuses a split pattern that matches no shard)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from pathlib import Path

TRAIN, VAL = "train", "val"
#: split part -> shard name prefix in a bucket folder (``shard-000000.tar``, ``val-000000.tar``)
PREFIXES = {TRAIN: "shard", VAL: "val"}
#: The rule this vfm splits by, name/version, recorded in ``shard_config.json`` (``split_rule``): a folder
#: split by another rule is not topped up (its videos' new clips could land on the other side of their old ones).
SPLIT_RULE = "source-content/1"
#: What :data:`SPLIT_RULE` hashes, in words: ``shard_config.json``'s ``split_hashes``, for whoever audits a folder.
SPLIT_HASHES = ("each sample's extra.split_key: 'content:' + its source video's fingerprint (the file's size and three "
                "64 KiB samples of its bytes, as vfm curate recorded it), else the clip table's video_id (a hash of the "
                "source path), else the clip id; val when its SHA-256, read as a fraction in [0, 1), is below val_fraction")
_CONTENT = "content:"


def check_val_fraction(value: object) -> float:
    """``value`` as a fraction in [0, 1), else a ValueError naming what is accepted."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value < 1:
        raise ValueError(f"val_fraction must be a number with 0 <= val_fraction < 1 (the share of source videos held "
                         f"out for validation, all clips of each; 0: none), got {value!r}")
    return float(value)


def split_key(fingerprint: str | None, video_id: str | None, clip_id: str) -> str:
    """What a clip's split is drawn from: its source video's content fingerprint (the same bytes at any
    path, under any video id), else that video's id (the clip table's ``video_id``: a video vfm curate
    could not fingerprint, or a folder without its records), else the clip's own id (a table another tool wrote)."""
    return _CONTENT + fingerprint if fingerprint else (video_id or clip_id)


def source_fingerprints(clips_dir: Path, video_ids: Iterable[str]) -> dict[str, str]:
    """video id -> the content fingerprint vfm curate recorded for that video's input (its record in
    ``clips_dir/.state/videos``), for the ids that have one: one small JSON read per video, the source
    itself is not needed (sharding may run where the raw videos are not)."""
    from vfm_curator.io.fingerprint import FORMAT
    from vfm_curator.io.state import VIDEO_ID, load_record

    found = {}
    for vid in set(video_ids):
        if not vid or not VIDEO_ID.fullmatch(vid):  # an id no record is named by: never joined into a path
            continue
        record = load_record(clips_dir, vid)
        kept = record.get("input") if isinstance(record, dict) else None
        fp = kept.get("fingerprint") if isinstance(kept, dict) else None
        if isinstance(fp, str) and FORMAT.fullmatch(fp):
            found[vid] = fp
    return found


def set_split_keys(clips_dir: Path, tasks: list) -> dict[str, int]:
    """Give each :class:`~vfm_curator.stages.shard_task.ShardTask` its ``split_key`` (:func:`split_key`),
    its video's fingerprint read from ``clips_dir``'s records (:func:`source_fingerprints`). Returns how many
    fell back to another key than the content's: ``{"video_id": n, "clip_id": m}``, those above 0
    (:func:`fallback_notice` says what that means)."""
    fingerprints = source_fingerprints(clips_dir, (t.video_id for t in tasks))
    fallbacks = {"video_id": 0, "clip_id": 0}
    for task in tasks:
        fingerprint = fingerprints.get(task.video_id)
        task.split_key = split_key(fingerprint, task.video_id, task.id)
        if not fingerprint:
            fallbacks["video_id" if task.video_id else "clip_id"] += 1
    return {key: n for key, n in fallbacks.items() if n}


def fallback_notice(fallbacks: dict[str, int], clips: int, clips_dir: Path) -> list[str]:
    """One line when clips' split keys fell back (:func:`set_split_keys`): their split does not follow
    the video's bytes, so it moves when the video is moved or renamed and curated again (a clips folder
    copied without its ``.state/``, or a clip table another tool wrote)."""
    if not fallbacks:
        return []
    parts = []
    if fallbacks.get("video_id"):
        parts.append(f"{fallbacks['video_id']} split by video_id (a hash of the source path: a video moved or renamed "
                     "and curated again gets another split key and may change sides); keep the clips folder's "
                     ".state/videos records with its clips (copy .state/ along) to keep the split stable")
    if fallbacks.get("clip_id"):
        parts.append(f"{fallbacks['clip_id']} split by their own clip id (no video_id in the clip table: clips of one "
                     "video may land in both splits); give the table a video_id column naming each clip's source video")
    n = sum(fallbacks.values())
    return [f"val split: the split key of {n} of {clips} clips is not their source video's content (no fingerprint "
            f"recorded in {clips_dir / '.state' / 'videos'}): {'; '.join(parts)}"]


def key_fraction(key: str) -> float:
    """The split key's SHA-256 as a number in [0, 1) (its first 8 bytes)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") / 2.0**64


def split_of(key: str, val_fraction: float) -> str:
    """``"val"`` when the split key's (:func:`split_key`) fraction is below ``val_fraction``, else ``"train"``."""
    return VAL if key_fraction(key) < val_fraction else TRAIN


def split_pattern(split: str) -> str:
    """The energon split part pattern (a regular expression over shard file names) of ``split``."""
    return rf"^{PREFIXES[split]}-\d+\.tar$"
