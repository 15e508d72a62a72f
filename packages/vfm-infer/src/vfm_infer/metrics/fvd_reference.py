"""FVD's reference side: the real videos of a folder, read for their first frames only, and the cache of
their feature statistics (mean, covariance) so that comparing many checkpoints extracts them once.

The cache is a ``.npz`` (no pickle) named by the reference folder and its content, its key a sha256 over
every video's relative path and bytes, the I3D weights' sha256 and the clip settings: any change there is
a miss. Content, not size and modification time: ``cp -p`` of another video of the same size kept both
and read the other video's statistics. Each video's sha256 is remembered beside the statistics
(``fvd-<folder id>-digests.json``) by its device, inode, size, mtime and ctime, so a hit reads no video byte
(it read every byte of every video, where the features decode their first frames only); a video changed in
any way, ``cp -p`` or ``touch -d`` included (they set a new ctime), is read again.

Statistics of the folder's other weights or settings stay cached beside each other (two I3D weights or
``fvd.frames`` 16 and 32 in turn are both read from the cache); when the folder's content changes, the
statistics of its earlier content are removed: nothing reads them again, and each is a (D, D) covariance.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from vfm_infer.metrics.frechet import GaussianStats

#: containers taken from a reference folder (other files are ignored: FFmpeg would read a .txt as "tty" video)
VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts", ".flv", ".wmv", ".ogv",
                  ".3gp", ".gif")
#: bumped when the features a cached file holds would change (frame sampling, resizing, network input)
FEATURES_VERSION = 3  # 2: TF1 resize_bilinear's grid (1: torch's); 3: 2-frame windows past 16 frames (2: global)


def reference_videos(folder: str | Path) -> list[Path]:
    """Every video in ``folder`` and its sub-folders (by suffix, hidden files skipped), sorted."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"fvd.reference = {str(folder)!r} " + ("is not a folder" if folder.exists() else "does not exist")
                                + "; accepted: a folder of real videos (any container PyAV reads: "
                                + ", ".join(VIDEO_SUFFIXES) + ")")
    videos = sorted(p for p in folder.rglob("*") if p.suffix.lower() in VIDEO_SUFFIXES and p.is_file()
                    and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    if not videos:
        raise FileNotFoundError(f"fvd.reference = {str(folder)!r} holds no video (suffixes {', '.join(VIDEO_SUFFIXES)})")
    return videos


def first_frames(path: Path, count: int) -> np.ndarray:
    """Up to ``count`` first frames of the video at ``path``, (T, H, W, 3) uint8 RGB; decoding stops there,
    so a long real video costs its first frames only. What PyAV cannot decode is a ValueError naming it."""
    from vfm_infer.metrics.base import decoded

    return decoded(path, max_frames=count, named="fvd reference ")


def content_digest(videos: list[Path], folder: Path, cache_dir: Path) -> str:
    """sha256 of the reference videos' relative paths and bytes (the content part of the cache key). Each video's
    own sha256 is remembered in ``digests_path`` by its stat (:mod:`vfm_infer.metrics.file_digests`): a cache hit
    reads no video byte, while a video changed in any way (its ctime) is read again."""
    from vfm_infer.metrics.file_digests import digests

    names = [str(path.relative_to(folder)) for path in videos]
    files = [list(pair) for pair in zip(names, digests(videos, names, digests_path(cache_dir, folder)))]
    return hashlib.sha256(json.dumps(files).encode()).hexdigest()


def digests_path(cache_dir: Path, folder: Path) -> Path:
    """``<cache_dir>/fvd-<folder id>-digests.json``: the sha256 of each of the folder's videos, by its stat."""
    return cache_dir / f"{_folder_prefix(folder)}digests.json"


def cache_key(content: str, weights_digest: str, settings: dict) -> str:
    """sha256 of what the statistics depend on: the videos' content, the weights, the settings."""
    doc = {"version": FEATURES_VERSION, "content": content, "weights": weights_digest, "settings": settings}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _folder_prefix(folder: Path) -> str:
    return f"fvd-{hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]}-"


def cache_path(cache_dir: Path, folder: Path, content: str, key: str) -> Path:
    """``<cache_dir>/fvd-<folder id>-<content id>-<key>.npz``: one file per reference folder, content,
    weights and settings."""
    return cache_dir / f"{_folder_prefix(folder)}{content[:12]}-{key[:24]}.npz"


def remove_other_contents(cache_dir: Path, folder: Path, content: str) -> None:
    """Remove the cached statistics of ``folder`` as it was with other content (files of earlier versions,
    named ``fvd-<folder id>-<key>.npz``, too): kept, they only fill the cache."""
    prefix = _folder_prefix(folder)
    for path in cache_dir.glob(f"{prefix}*.npz"):
        if not path.name.startswith(f"{prefix}{content[:12]}-"):
            path.unlink(missing_ok=True)


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vfm" / "fvd"


def read_cached(path: Path, key: str) -> GaussianStats | None:
    """The statistics cached at ``path`` for ``key``, or None (absent, unreadable, another key, not the
    mean (D,) and covariance (D, D) of 2 or more vectors)."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["key"]) != key:
                return None
            mu, sigma, count = data["mu"].astype(np.float64), data["sigma"].astype(np.float64), int(data["count"])
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):  # BadZipFile: a copy cut short
        return None  # a partial or foreign file: recomputed and replaced
    if mu.ndim != 1 or sigma.shape != (mu.shape[0],) * 2 or count < 2:
        return None
    return GaussianStats(mu, sigma, count)


def write_cached(path: Path, key: str, stats: GaussianStats) -> None:
    """Write ``stats`` at ``path`` (renamed into place whole)."""
    import io

    from vfm_plugins.files import replace_file

    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.savez(buffer, key=np.array(key), mu=stats.mu, sigma=stats.sigma, count=np.array(stats.count))
    replace_file(path, buffer.getvalue())
