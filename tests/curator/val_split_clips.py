"""Curated clips of several videos on both sides of a val fraction, and where their samples were
sharded: the setup of the ``val_fraction`` tests, through the library (tests/curator) and through
the CLI (tests/cli). The split is by source video: by its content (the fingerprint vfm curate records
of it), so which side a video goes to does not depend on the folder it is in."""

from __future__ import annotations

import tarfile
import tempfile
from functools import cache
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq

import vfm_curator
from vfm_curator.io.fingerprint import fingerprint
from vfm_curator.pipelines.shard_split import source_fingerprints, split_key, split_of
from vfm_curator.synth import make_video

SIZE, FRAMES = (32, 48), 5  # 12-frame shots: two windows of 5 frames per clip
SHOTS = 6  # shots per video: each a clip of its own
FRACTION = 0.3
NAMES = range(50)  # the video numbers curated_with_both_splits picks from; a top-up adds TOP_UP
TOP_UP = 99


def curate(inputs: Path, clips: Path) -> list[str]:
    """Curate ``inputs`` into ``clips`` (a re-run adds new videos' clips); the clip ids of its table."""
    vfm_curator.curate(inputs, clips, {"run": {"runner": "serial"},
                                       "options": {"split": {"min_clip_s": 0.4}, "stitch": {"threshold": 1.0}}})
    return clip_ids(clips)


def clip_ids(clips: Path) -> list[str]:
    return [row["id"] for row in pq.read_table(clips / "clips.parquet").to_pylist()]


def video_of(clips: Path) -> dict[str, str]:
    """clip id -> its split key (its source video's content fingerprint) in the clip table of ``clips``."""
    rows = pq.read_table(clips / "clips.parquet").to_pylist()
    recorded = source_fingerprints(clips, (row.get("video_id") or "" for row in rows))
    return {row["id"]: split_key(recorded.get(row.get("video_id") or ""), row.get("video_id"), row["id"]) for row in rows}


def video_path(inputs: Path, n: int) -> Path:
    return inputs / f"v{n}.mp4"


def video_ids(clips: Path) -> dict[str, str]:
    """clip id -> its source video's id (a hash of its path) in the clip table of ``clips``."""
    return {row["id"]: row["video_id"] for row in pq.read_table(clips / "clips.parquet", columns=["id", "video_id"]).to_pylist()}


def video_split(inputs: Path, n: int, fraction: float = FRACTION) -> str:
    """The split video ``n`` goes to, wherever it is: the split key is its bytes' fingerprint."""
    return split_of(content_key(n), fraction)


@cache
def content_key(n: int) -> str:
    """Video ``n``'s split key (make_video writes the same bytes for the same arguments)."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "v.mp4"
        _make(path, n)
        return split_key(fingerprint(str(path)), None, "")


def _make(path: Path, n: int) -> None:
    make_video(path, [12] * SHOTS, width=SIZE[1], height=SIZE[0], seed=10 + n)


def add_video(inputs: Path, n: int) -> None:
    _make(video_path(inputs, n), n)
    (inputs / f"v{n}.txt").write_text(f"video {n}: six short shots")


def pick_videos(inputs: Path, train: int, val: int, fraction: float = FRACTION) -> list[int]:
    """Numbers of ``train`` videos that go to train and ``val`` that go to val at ``fraction``."""
    sides: dict[str, list[int]] = {"train": [], "val": []}
    wanted = {"train": train, "val": val}
    for n in NAMES:  # in order, until both sides have theirs: each video is made once to fingerprint it
        side = video_split(inputs, n, fraction)
        if len(sides[side]) < wanted[side]:
            sides[side].append(n)
        if all(len(sides[k]) == wanted[k] for k in sides):
            break
    assert [len(sides["train"]), len(sides["val"])] == [train, val], sides  # (0.7^50: never)
    return sorted(sides["train"] + sides["val"])


def curated_with_both_splits(root: Path, fraction: float = FRACTION,
                             curate: Callable[[Path, Path], list[str]] = curate) -> tuple[Path, Path, list[str]]:
    """(inputs, clips, clip ids) of three videos of six shots each, two going to train and one to val
    at ``fraction``. ``curate(inputs, clips)`` curates and returns the clip ids (the library's, or
    ``vfm curate``'s)."""
    inputs, clips = root / "in", root / "clips"
    inputs.mkdir(parents=True, exist_ok=True)
    for n in pick_videos(inputs, train=2, val=1, fraction=fraction):
        add_video(inputs, n)
    ids = curate(inputs, clips)
    videos = video_of(clips)
    assert len(set(videos.values())) == 3 and len(ids) >= 3 * 2, videos  # several shots per video
    assert {split_of(videos[i], fraction) for i in ids} == {"train", "val"}
    return inputs, clips, ids


def splits_by_video(out: Path, videos: dict[str, str]) -> dict[str, set[str]]:
    """video (``videos``: clip id -> what names its video) -> the shard prefixes its samples are in
    (one each when no video straddles)."""
    found: dict[str, set[str]] = {}
    for key, prefix in keys_by_prefix(out).items():
        found.setdefault(videos[clip_of(key)], set()).add(prefix)
    return found


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
