"""Staging files: how the transcode stage hands clips to the write stage through the output folder.

Holding every clip of a video (its H264 bytes and sampled frames) in the task until the write stage
made a run's memory grow with the video's length, and sent every clip through Ray's object store
between stages. Instead the transcode stage writes each clip as ``OUT/clips/.<vid>.<clip>.a<attempt>.p<pid>.<random>.mp4.tmp``
(and its samples as ``....samples.npz.tmp``); the task carries only the paths, and the write stage's
commit renames a kept clip's file to ``clips/<id>.mp4`` (:mod:`vfm_curator.io.commits`: fsync, then
``os.replace``, same folder).

Nothing half-written is ever read as a result:

- a name is unique to the video, the clip, the attempt and the worker process, and is created
  exclusively with a random part (mkstemp), so a retried call or a later attempt never reuses (or
  collides with) a file that a dead one was writing, and a link planted at a name is never written through;
- the write stage deletes what it does not keep (filtered clips, a failed video), also when it stops
  on an error; the driver deletes every staging file of a video once the video's task is back
  (:func:`sweep`: a worker killed between transcode and write; with the write stage's other files
  written aside for a commit, a worker killed before it), and of the whole folder when a run
  ends (:func:`sweep_all`);
- a run that was killed leaves them behind as ``.*.tmp`` files, which the next run deletes before it
  starts (it holds the folder's lock, so none belongs to a live run).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
from vfm_plugins.files import remove_leftover, temporary_file

from vfm_curator.io.paths import disk_full, open_if_file, safe_join

FOLDER = "clips"


def staging_path(out: str | Path, vid: str, clip_id: str, attempt: int, suffix: str) -> Path:
    """A new empty staging file of one clip (``suffix``: ``mp4`` or ``samples.npz``) for this attempt
    and process, ``.<vid>.<clip>.a<attempt>.p<pid>.<random>.<suffix>.tmp``; its folder is made. Created
    exclusively under an unpredictable name (:func:`vfm_plugins.files.temporary_file`): a link planted
    in the folder at a guessable name is never written through."""
    folder = safe_join(out, FOLDER)
    folder.mkdir(parents=True, exist_ok=True)
    return temporary_file(folder, prefix=f".{vid}.{clip_id}.a{int(attempt)}.p{os.getpid()}.", suffix=f".{suffix}.tmp")


def save_samples(path: Path, frames: list[np.ndarray]) -> None:
    """The sampled frames as an uncompressed ``.npz`` (lossless: the embeddings and thumbnails are the
    ones in-memory samples give). No fsync: a staging file never outlives its run."""
    try:
        with open(path, "wb") as fh:
            np.savez(fh, *[np.ascontiguousarray(f) for f in frames])
    except OSError as exc:
        Path(path).unlink(missing_ok=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise disk_full(Path(path)) from exc
        raise


def staged_file(staged: str | Path, final: Path) -> Path:
    """A kept clip's staging file, for the commit that renames it to ``final``
    (:mod:`vfm_curator.io.commits`); it must still be a regular file (a link there is no clip written).
    Synced to disk here: the commit outlives a crash of the machine, so what it names must too."""
    staged = Path(staged)
    fd = open_if_file(staged, os.O_RDONLY)  # a link or a pipe is none, the pipe not waited on
    try:
        if fd is None:
            # EIO: a machine-caused failure, so the video is done again (a new attempt stages anew)
            raise OSError(errno.EIO, f"the staging file of {final.name} is gone ({staged.name})")
        os.fsync(fd)
    finally:
        if fd is not None:
            os.close(fd)
    return staged


def discard(clip) -> None:
    """Delete a clip's staging files (a clip that is filtered out, or of a failed video)."""
    for name in ("staged", "samples_file"):
        path = getattr(clip, name)
        if path:
            Path(path).unlink(missing_ok=True)
            setattr(clip, name, None)


def sweep(out: str | Path, vid: str) -> int:
    """Delete every file of video ``vid`` written aside for a commit (any attempt, any process): its
    staging files, and the thumbnails and metadata part the write stage writes aside before its commit
    (``thumbs/.<vid>.*.tmp``, ``.state/parts/.<vid>.*.tmp``: a worker killed before the commit left them
    until the next run); returns how many. Never a file a written commit names, and only regular files
    (:func:`vfm_plugins.files.remove_leftover`): a link at such a name is left alone."""
    from vfm_curator.io.commits import ASIDE_FOLDERS, pending

    committed = pending(out, vid)
    gone = 0
    for name in ASIDE_FOLDERS:
        try:
            folder = safe_join(out, name)
        except ValueError:  # a link out of the folder: not ours (check_out_folder names it)
            continue
        for path in folder.glob(f".{vid}.*.tmp") if folder.is_dir() else []:
            if path not in committed:
                gone += remove_leftover(path)
    return gone


def sweep_all(out: str | Path) -> None:
    """Delete every staging file in the folder (the run holding its lock is ending), but those a
    written commit names (a run stopped while carrying one out: the next run finishes it)."""
    from vfm_curator.io.commits import pending

    folder = safe_join(out, FOLDER)
    committed = pending(out)
    for path in folder.glob(".*.*.a*.p*.tmp") if folder.is_dir() else []:
        if path not in committed:
            remove_leftover(path)
