"""Which split a clip's samples go to (``val_fraction``): a function of the clip's source video id
alone (the clip id for a row without one), so every clip of a video and every window of a clip stay
in one split (neighbouring shots share scene, people and lighting: a held-out shot beside a trained
one measures recall, not generalisation), and nothing moves between train and val on a re-run or
top-up, whatever the order or the worker count. Each split has its own shard name prefix in a bucket
folder, and the bucket's energon split parts list a prefix only where it has shards (energon
refuses a split pattern that matches no shard)."""

from __future__ import annotations

import hashlib
import math

TRAIN, VAL = "train", "val"
#: split part -> shard name prefix in a bucket folder (``shard-000000.tar``, ``val-000000.tar``)
PREFIXES = {TRAIN: "shard", VAL: "val"}


def check_val_fraction(value: object) -> float:
    """``value`` as a fraction in [0, 1), else a ValueError naming what is accepted."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value < 1:
        raise ValueError(f"val_fraction must be a number with 0 <= val_fraction < 1 (the share of source videos held "
                         f"out for validation, all clips of each; 0: none), got {value!r}")
    return float(value)


def split_key(video_id: str | None, clip_id: str) -> str:
    """What a clip's split is drawn from: its source video's id (the clip table's ``video_id``), or
    its own id where the row has none (a table another tool wrote)."""
    return video_id or clip_id


def key_fraction(key: str) -> float:
    """The split key's SHA-256 as a number in [0, 1) (its first 8 bytes)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") / 2.0**64


def split_of(key: str, val_fraction: float) -> str:
    """``"val"`` when the split key's (:func:`split_key`) fraction is below ``val_fraction``, else ``"train"``."""
    return VAL if key_fraction(key) < val_fraction else TRAIN


def split_pattern(split: str) -> str:
    """The energon split part pattern (a regular expression over shard file names) of ``split``."""
    return rf"^{PREFIXES[split]}-\d+\.tar$"
