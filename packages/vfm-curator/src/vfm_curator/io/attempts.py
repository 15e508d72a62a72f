"""The attempt fence: only the attempt of a video that the driver is waiting for may write its results.

A stage call that runs past ``run.stage_timeout_s`` is cancelled (``ray.cancel(force=True)``) and
its videos are failed and run again; but a cancel does not always stop the call, and one that keeps
running can reach the write stage later, while the driver has recorded the failure or run the video
again, and rename its clips, metadata part and record over theirs. So:

- the driver gives each attempt of a video a random token when it hands the video to the runner
  (:func:`open_fence`, ``OUT/.state/attempts/<vid>``; the task carries it as ``context["fence"]``);
- the write stage writes only inside :func:`commit_window`: it holds the video's lock and is told
  whether its token is still the video's;
- when a video's task comes back, the driver closes the fence under the same lock (:func:`settle`)
  before it looks at the record and sweeps the staging files. An attempt it has given up on (a
  cancelled call) then finds no token and writes nothing, at any time after; one that finished its
  writes first is seen in the record, so its result is kept rather than overwritten.

The lock is ``flock`` on the fence file; where the filesystem has none the token alone decides (a
zombie attempt that read its token just before the driver closed the fence could still write).
Tokens are random, so an attempt of an earlier run (which restarts attempt numbers on ``--retry``)
can never match a later one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import secrets
import time
from pathlib import Path
from typing import Iterator

from vfm_plugins.files import remove_leftover

from vfm_curator.io.paths import open_if_file, open_replacing_link, safe_join
from vfm_curator.io.state import STATE, VIDEO_ID

_NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
#: How long the driver waits for a cancelled call's write in progress before it moves on.
SETTLE_WAIT_S = 60.0
log = logging.getLogger("vfm_curator.attempts")


def fences(out: str | Path) -> Path:
    """The folder of the fences: one file per video being run. Its own name and the fences' are not
    resolved: a link planted at either (an output folder from elsewhere holding ``.state/attempts ->
    ../clips``) is never followed, see :func:`clear` and :func:`open_fence`."""
    return safe_join(out, STATE) / "attempts"


def fence_path(out: str | Path, vid: str) -> Path:
    if not VIDEO_ID.fullmatch(vid):
        raise ValueError(f"video id {vid!r} cannot name a fence; accepted: letters, digits, '_' and '-'")
    return fences(out) / vid



def clear(out: str | Path) -> None:
    """Delete the fences a killed run never took back (the caller holds the folder's lock, so none is
    a live run's), leaving a real folder for this run's. Only regular files in a real folder: a
    link at the folder's name is removed, not followed (clearing through ``.state/attempts ->
    ../clips`` deleted every clip file), and a link among the fences is left alone."""
    folder = _real_folder(fences(out))
    for fence in folder.iterdir():
        remove_leftover(fence)


def _real_folder(folder: Path) -> Path:
    """``folder`` as a directory of its own: anything else at its name (a link, a file) is no run's
    fences folder and is removed first (a link's target is left alone)."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_fence(out: str | Path, vid: str) -> str:
    """A new attempt of ``vid`` may write (an older one no longer may); returns its token. A link at
    the fence's name is removed and a new fence made there, its target untouched (written through,
    it truncated a file of the folder to a token, and the settle deleted it)."""
    token = secrets.token_hex(16)
    path = fence_path(out, vid)
    _real_folder(path.parent)
    fd = open_replacing_link(path, os.O_RDWR, 0o644)
    try:
        _lock(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, token.encode("ascii"), 0)
    finally:
        os.close(fd)  # releases the lock
    return token


@contextlib.contextmanager
def commit_window(out: str | Path, vid: str, token: str | None) -> Iterator[bool]:
    """Yields whether ``token`` is still the attempt of ``vid`` the driver waits for, holding the
    video's lock until the block ends (the driver cannot settle the video meanwhile). ``token`` None
    (a task not handed out by the clipping driver: a stage used on its own) is always current."""
    if token is None:
        yield True
        return
    # none: settled (the driver is done with this video), or a link planted there (no driver's fence)
    fd = open_if_file(fence_path(out, vid), os.O_RDONLY)
    if fd is None:
        yield False
        return
    try:
        _lock(fd)
        # a fence removed after we opened it (the driver settled the video) reads as closed
        yield os.fstat(fd).st_nlink > 0 and os.pread(fd, 64, 0) == token.encode("ascii")
    finally:
        os.close(fd)


@contextlib.contextmanager
def settle(out: str | Path, vid: str) -> Iterator[None]:
    """The driver takes ``vid``'s task back: wait for any write of it in progress, close its fence
    (no attempt of it can write after this), and run the block under the video's lock."""
    path = fence_path(out, vid)
    # none: no fence, or a link planted there since it was opened (no attempt's fence: commit_window says so)
    fd = open_if_file(path, os.O_RDWR)
    if fd is None:
        yield
        return
    try:
        if not _lock(fd, wait_s=SETTLE_WAIT_S):
            # a write stuck inside its window (a worker the cancel could not end, in a hung I/O): the
            # run goes on rather than hang on one video; that write may still land when it wakes
            log.warning("video %s: a cancelled call has held its write lock for %g s; recording it without waiting "
                        "(that call may still write the video if it wakes)", vid, SETTLE_WAIT_S)
        os.ftruncate(fd, 0)
        path.unlink(missing_ok=True)
        yield
    finally:
        os.close(fd)


def _lock(fd: int, wait_s: float | None = None) -> bool:
    """Take the fence's lock (waiting at most ``wait_s`` when given); whether it was taken. A
    filesystem without flock counts as taken (the token alone decides there)."""
    deadline = None if wait_s is None else time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if deadline is not None else 0))
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        except OSError as exc:
            if exc.errno not in _NO_FLOCK:
                raise
            return True
