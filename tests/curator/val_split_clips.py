"""Curated clips on both sides of a val fraction, and where their samples were sharded: the setup of
the ``val_fraction`` tests, through the library (tests/curator) and through the CLI (tests/cli)."""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq

import vfm_curator
from vfm_curator.pipelines.shard_split import split_of
from vfm_curator.synth import make_video

SIZE, FRAMES = (32, 48), 5  # 12-frame shots: two windows of 5 frames per clip
FRACTION = 0.3


def curate(inputs: Path, clips: Path) -> list[str]:
    """Curate ``inputs`` into ``clips`` (a re-run adds new videos' clips); the clip ids of its table."""
    vfm_curator.curate(inputs, clips, {"run": {"runner": "serial"},
                                       "options": {"split": {"min_clip_s": 0.4}, "stitch": {"threshold": 1.0}}})
    return clip_ids(clips)


def clip_ids(clips: Path) -> list[str]:
    return [row["id"] for row in pq.read_table(clips / "clips.parquet").to_pylist()]


def add_video(inputs: Path, n: int) -> None:
    make_video(inputs / f"v{n}.mp4", [12] * 6, width=SIZE[1], height=SIZE[0], seed=10 + n)
    (inputs / f"v{n}.txt").write_text(f"video {n}: six short shots")


def curated_with_both_splits(root: Path, fraction: float = FRACTION,
                             curate: Callable[[Path, Path], list[str]] = curate) -> tuple[Path, Path, list[str]]:
    """(inputs, clips, clip ids) with at least one clip on each side of ``fraction``: the ids hash the
    videos' absolute paths, so a tmp folder's clips are added to, a video at a time, until they do.
    ``curate(inputs, clips)`` curates and returns the clip ids (the library's, or ``vfm curate``'s)."""
    inputs, clips = root / "in", root / "clips"
    ids: list[str] = []
    for n in range(6):
        add_video(inputs, n)
        ids = curate(inputs, clips)
        if n and {split_of(i, fraction) for i in ids} == {"train", "val"}:
            return inputs, clips, ids
    raise AssertionError(f"no val/train mix at {fraction} in {len(ids)} clips")  # (0.7^60: never)


def keys_by_prefix(out: Path) -> dict[str, str]:
    """sample key -> the name prefix of the shard holding it (``shard`` or ``val``)."""
    found = {}
    for tar_path in sorted(out.glob("*/*.tar")):
        with tarfile.open(tar_path) as tar:
            for name in tar.getnames():
                found[name.split(".", 1)[0]] = tar_path.name.split("-", 1)[0]
    return found


def clip_of(key: str) -> str:
    return key.rsplit("-w", 1)[0] if "-w" in key else key
