"""One owner per output folder: a lock file that names its holder (pid, host, start time, command).

Every vfm command that writes a folder (``vfm train``'s run folder, ``vfm generate``, ``vfm curate``,
``vfm shard``) holds :class:`FolderLock` on it, so a second run into the same folder is refused with
a one-line error naming the first, instead of both writing the same files.

How it decides (POSIX):

- The lock is ``fcntl.flock`` on ``FOLDER/.vfm-lock``, held on an open descriptor for as long as the
  run lives. The kernel drops it when the holder's process dies, however it dies (kill -9 included),
  so a lock that cannot be taken means a live holder, and one that can means none. A holder that
  is already dying (its main thread gone, others still ending) is waited for, up to 15 s.
- The file's content (one JSON line) names the holder. A taker that finds content left behind by a
  holder on *this* host knows that holder is dead (the kernel released its lock): it takes over with
  a :class:`StaleLockWarning` naming it.
- Content left by a holder on *another* host is not taken over on this host's word: some shared
  filesystems do not carry flock between hosts, so this host cannot tell whether that run still
  lives. The run is refused (:class:`HeldOnAnotherHostError`), naming that host and the file to
  delete once that run is known to be gone, unless the taker names that very holder as ``gone``
  (a process on that host found its pid ended: ``vfm train`` on several nodes asks its ranks there).
- Where the filesystem has no flock at all, the content alone decides: a holder on this host whose
  pid is gone is stale; a live pid refuses, and another host's holder as above. The file is made
  with ``O_CREAT | O_EXCL`` (one maker wins); a stale one is removed only by the taker that made
  ``FOLDER/.vfm-lock.takeover`` (``O_EXCL`` again), which reads the holder again under it: two takers
  of one stale lock never both hold the folder (``O_EXCL`` is atomic on local filesystems, NFSv3 and
  later, Lustre, GPFS, CephFS). A taker killed inside those few steps leaves the marker: the next
  taker is refused naming it, to delete once no run is starting there.
- A holder names its pid namespace (``/proc/self/ns/pid``): a pid is only looked up in the
  namespace that gave it. Without flock, a holder of this host in another namespace (another
  container with the same host name) cannot be told alive or gone: refused as another host's is.

A clean release deletes the file. The lock is re-entrant within one process (a command that holds
it may call a library function that takes it again), and a forked child never releases its parent's
lock.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import socket
import stat
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vfm_plugins import json_data
from vfm_plugins.errors import Notice
from vfm_plugins.files import NotRegularFileError, open_regular
from vfm_plugins.parent_watch import pid_exists
from vfm_plugins.text import printable

try:
    import fcntl
except ImportError:  # not POSIX: the content decides alone
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".vfm-lock"
#: Beside the lock file, made by the one taker removing a stale lock where there is no flock.
TAKEOVER = ".takeover"
#: How long a taker without flock waits for another's takeover of a stale lock (a few file operations).
TAKEOVER_WAIT_S = 5.0
# errors that mean "this filesystem has no flock", as opposed to "someone holds it"
_NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}


class FolderLockedError(RuntimeError):
    """The folder is held by another run; ``holder`` names it, ``path`` is the lock file."""

    def __init__(self, folder: Path, path: Path, holder: "LockHolder | None", why: str = "") -> None:
        self.folder, self.path, self.holder, self.why = folder, path, holder, why
        super().__init__(self._message())

    def _message(self) -> str:
        who = self.holder.describe() if self.holder else "a run that is still starting (no holder written yet)"
        return f"{self.folder} is in use by another run: {who}{self.why} (lock file {self.path})"

    def __reduce__(self):  # rebuilt from its fields, so it crosses processes (Ray workers, spawn)
        return type(self), (self.folder, self.path, self.holder, self.why)


class HeldOnAnotherHostError(FolderLockedError):
    """The lock file names a holder on another host, which this host cannot tell alive or ended; a job
    with a process on that host may ask it, then take over with ``FolderLock(folder, gone=holder)``."""


class LockLinkError(FolderLockedError):
    """A symbolic link sits where the lock file goes (no vfm run makes one: a folder from elsewhere,
    or a planted ``.vfm-lock -> ~/.bashrc``). Refused, not removed: removing it is not atomic with
    the check, so a run started beside this one could have its real lock file removed instead."""

    def __init__(self, folder: Path, path: Path, target: str | None = None) -> None:
        if target is None:
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
        self.target = target  # kept, so a copy in another process (where the link may not be) says the same
        super().__init__(folder, path, None)  # the parent's fields, its own message

    def _message(self) -> str:
        return (f"{self.path} is a symbolic link (to {self.target}) where vfm keeps the folder's lock file; "
                f"no vfm run makes one: remove the link (what it points to is not touched) and run again")

    def __reduce__(self):
        return type(self), (self.folder, self.path, self.target)


class LockNotAFileError(FolderLockedError):
    """A named pipe, a device or a socket sits where the lock file goes (no vfm run makes one: a run folder
    from elsewhere). Refused, not removed, as :class:`LockLinkError`; flock on it failed with a bare EINVAL."""

    def __init__(self, folder: Path, path: Path, kind: str = "") -> None:
        self.kind = kind or _kind_of(path)
        super().__init__(folder, path, None)

    def _message(self) -> str:
        return (f"{self.path} is not a regular file ({self.kind}) where vfm keeps the folder's lock file; "
                "no vfm run makes one: remove it and run again")

    def __reduce__(self):
        return type(self), (self.folder, self.path, self.kind)


def _kind_of(path: Path) -> str:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "not a file"
    return ("a named pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a folder" if stat.S_ISDIR(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")


class StaleLockWarning(Notice):
    """A lock left by a run that died was taken over."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds (or held) a folder."""

    pid: int
    host: str
    started: str
    command: str
    #: its pid namespace (``pid:[4026531836]``; "" where there is none, or written before the field)
    pid_ns: str = ""

    def describe(self) -> str:
        # read from the lock file (anyone who can write the folder wrote it): printed escaped
        where = f" (pid namespace {printable(self.pid_ns)})" if self.pid_ns and self.pid_ns != _pid_namespace() else ""
        return (f"pid {self.pid} on host {printable(self.host)}{where}, started {printable(self.started)}, "
                f"command {self.command!r}")

    def here(self) -> bool:
        """Whether its pid can be looked up from this process: the same host and pid namespace (a
        holder written before namespaces were recorded is taken as in this one, as it was)."""
        return self.host == socket.gethostname() and (not self.pid_ns or self.pid_ns == _pid_namespace())

    @classmethod
    def me(cls, command: str | None) -> "LockHolder":
        if command is None:
            command = shlex.join(_command_line())
        if len(command) > 300:
            command = command[:297] + "..."
        return cls(os.getpid(), socket.gethostname(), time.strftime("%Y-%m-%dT%H:%M:%S%z"), command, _pid_namespace())

    @classmethod
    def parse(cls, text: str) -> "LockHolder | None":
        try:
            data: Any = json_data.loads(text)
            return cls(int(data["pid"]), str(data["host"]), str(data["started"]), str(data["command"]),
                       str(data.get("pid_ns") or ""))
        except (ValueError, KeyError, TypeError):
            return None

    def dumps(self) -> str:
        fields = {"pid": self.pid, "host": self.host, "started": self.started, "command": self.command}
        return json.dumps({**fields, **({"pid_ns": self.pid_ns} if self.pid_ns else {})}) + "\n"


# realpath of a lock file -> (lock, depth) held by this process (re-entrance)
_HELD: dict[str, tuple["FolderLock", int]] = {}


class FolderLock:
    """``with FolderLock(folder):`` the run owns ``folder`` (created if missing) until the block ends.

    Raises :class:`FolderLockedError` naming the holder when another live run owns it.
    """

    def __init__(self, folder: str | os.PathLike, *, command: str | None = None, name: str = LOCK_NAME,
                 gone: "LockHolder | None" = None) -> None:
        self.folder = Path(folder)
        # a holder on another host that a process there found ended: taken over as a dead one here is
        self.gone = gone
        self.path = self.folder / name
        self.command = command
        self._fd: int | None = None
        self._pid: int | None = None
        self._key: str | None = None
        self._created = False

    # --- taking and giving back ------------------------------------------------------------------

    def acquire(self) -> "FolderLock":
        self._created = not self.folder.exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        key = os.path.realpath(self.path)
        held = _HELD.get(key)
        if held is not None and held[0]._pid == os.getpid():  # this process holds it already
            _HELD[key] = (held[0], held[1] + 1)
            self._key, self._pid = key, os.getpid()
            return self
        self._fd = self._take() if fcntl is not None else None
        if self._fd is None:
            self._take_without_flock()
        self._pid, self._key = os.getpid(), key
        _HELD[key] = (self, 1)
        return self

    def release(self) -> None:
        """Give the folder back (deletes the lock file). A no-op in a forked child of the holder."""
        if self._key is None or self._pid != os.getpid():
            return
        lock, depth = _HELD.get(self._key, (self, 1))
        if depth > 1:
            _HELD[self._key] = (lock, depth - 1)
            self._key = None
            return
        _HELD.pop(self._key, None)
        self._key = None
        # Delete while still holding the lock: a taker that opened the old file finds it unlinked
        # and retries on a fresh one (see _take), so no two runs ever both hold the folder.
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)  # for every sharer of the descriptor (forked children too)
            os.close(self._fd)
            self._fd = None
        if self._created:  # a run that wrote nothing (e.g. it failed validation) leaves no folder behind
            try:
                self.folder.rmdir()
            except OSError:
                pass

    def __enter__(self) -> "FolderLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    # --- flock ------------------------------------------------------------------------------------

    def _take(self) -> int | None:
        """The locked descriptor, or None where this filesystem has no flock."""
        while True:
            try:
                # open_regular: a pipe or a device there (no vfm run makes one) is refused, never waited on
                fd = open_regular(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except NotRegularFileError:  # flock on a pipe failed with a bare EINVAL
                raise LockNotAFileError(self.folder, self.path) from None
            except FileNotFoundError:  # a releasing run removed the folder it had created: make it again
                self.folder.mkdir(parents=True, exist_ok=True)
                continue
            except OSError as exc:
                # ELOOP: a link at the lock's name; claiming through it would truncate its target
                if exc.errno == errno.ELOOP:
                    raise LockLinkError(self.folder, self.path) from None
                if exc.errno == errno.EISDIR:
                    raise LockNotAFileError(self.folder, self.path) from None
                raise
            try:
                _flock_unless_live(fd)
            except BlockingIOError:
                holder = _read_holder(fd, wait=True)
                os.close(fd)
                raise FolderLockedError(self.folder, self.path, holder) from None
            except OSError as exc:
                os.close(fd)
                if exc.errno in _NO_FLOCK:
                    return None
                raise
            # A releasing holder unlinks the file before unlocking: if ours is no longer the file at
            # the path, our lock guards nothing; take the new file instead.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            try:
                self._claim(fd, _read_holder(fd, wait=False))
            except BaseException:
                os.close(fd)
                raise
            return fd

    def _claim(self, fd: int, previous: "LockHolder | None") -> None:
        """We hold the flock; ``previous`` is what a holder that did not release left behind."""
        if previous is not None:
            _warn_stale(self.folder, previous, self._ended(previous, "its process ended without releasing the lock"))
        me = LockHolder.me(self.command).dumps().encode("utf-8")
        os.ftruncate(fd, 0)
        os.pwrite(fd, me, 0)
        os.fsync(fd)

    def _ended(self, previous: LockHolder, here: str) -> str:
        """Why ``previous``, which no longer holds the folder from this host's view, may be taken over
        (``here``: the reason for a holder on this host); a :class:`HeldOnAnotherHostError` for a holder
        on another host, unless a process there found it gone (``gone``)."""
        if previous.host == socket.gethostname():
            return here
        if previous != self.gone:
            raise HeldOnAnotherHostError(self.folder, self.path, previous,
                                         "; it may still run there (this host cannot tell): delete the lock file once it has ended")
        return f"its host {printable(previous.host)} has no such process any more"

    # --- no flock: the content decides -----------------------------------------------------------

    def _take_without_flock(self) -> None:
        me = LockHolder.me(self.command).dumps().encode("utf-8")
        for _ in range(3):  # again after a stale file was removed, or a takeover by another taker ended
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            except FileExistsError:
                if os.path.islink(self.path):
                    raise LockLinkError(self.folder, self.path) from None
                if not os.path.isfile(self.path) and os.path.lexists(self.path):
                    raise LockNotAFileError(self.folder, self.path) from None
                self._remove_stale()
                continue
            with os.fdopen(fd, "wb") as fh:
                fh.write(me)
            return
        raise FolderLockedError(self.folder, self.path, LockHolder.parse(_read_text(self.path)))

    def _remove_stale(self) -> None:
        """Remove the lock file if its holder is gone (else :class:`FolderLockedError`), holding the
        takeover marker: the holder read under it is the one removed, never a file another taker
        made in between. Returns also when another taker held the marker and has finished."""
        marker = self.path.with_name(self.path.name + TAKEOVER)
        try:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            self._wait_for_takeover(marker)
            return
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(LockHolder.me(self.command).dumps().encode("utf-8"))
            if not self.path.exists():  # released meanwhile: the folder is free
                return
            previous = LockHolder.parse(_read_text(self.path))
            if previous is None or (previous.here() and pid_exists(previous.pid)):
                raise FolderLockedError(self.folder, self.path, previous)
            if previous.host == socket.gethostname() and not previous.here() and previous != self.gone:
                raise HeldOnAnotherHostError(self.folder, self.path, previous,
                                             "; it may still run in that namespace (this process cannot look its pid up "
                                             "without flock): delete the lock file once it has ended")
            why = self._ended(previous, "its process is gone")
            os.unlink(self.path)
            _warn_stale(self.folder, previous, why)
        finally:
            os.unlink(marker)

    def _wait_for_takeover(self, marker: Path) -> None:
        """Another taker is removing a stale lock file: wait for it to finish (then its new lock
        refuses this run, or the folder is free). A marker that outlives the wait is named."""
        deadline = time.monotonic() + TAKEOVER_WAIT_S
        while time.monotonic() < deadline:
            if not os.path.lexists(marker):
                return
            time.sleep(0.01)
        taker = LockHolder.parse(_read_text(marker))
        raise FolderLockedError(self.folder, self.path, taker,
                                f"; it is taking over a stale lock and has not finished (marker {marker}): if that "
                                "run is gone, delete the marker and run again")

    @property
    def holder(self) -> "LockHolder | None":
        """Who the lock file names now (None when there is none)."""
        return LockHolder.parse(_read_text(self.path))


def _command_line() -> list[str]:
    """This process's command as a user would recognise it: ``vfm train ...``, ``python -m vfm_cli.main train ...``."""
    orig = list(getattr(sys, "orig_argv", []))
    if "-m" in orig[:-1]:
        i = orig.index("-m")
        return ["python", "-m", orig[i + 1], *sys.argv[1:]]
    return [Path(sys.argv[0]).name, *sys.argv[1:]] if sys.argv and sys.argv[0] else []


# how long a taker waits for a holder that is already dying (killed, its threads still ending)
EXITING_HOLDER_WAIT_S = 15.0


def _flock_unless_live(fd: int) -> None:
    """Take the flock on ``fd``, or raise BlockingIOError while a live run holds it.

    A process killed with SIGKILL shows as a zombie as soon as its main thread has gone, but the
    kernel closes its files (and so drops the flock) only when its last thread has ended: a torch
    run's threads can take seconds to leave a write or a collective. A holder on this host in that
    state is waited for, so ``kill -9`` and an immediate re-run (a scheduler's requeue) resumes
    instead of being refused by a run that no longer exists.
    """
    deadline = None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            holder = _read_holder(fd, wait=False)
            if holder is None or not holder.here() or pid_exists(holder.pid):
                raise
            deadline = deadline if deadline is not None else time.monotonic() + EXITING_HOLDER_WAIT_S
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _read_holder(fd: int, *, wait: bool) -> "LockHolder | None":
    """The holder named in the open lock file; a holder that has just taken the lock writes its
    name a moment later, so a refused taker waits for it briefly."""
    for _ in range(40 if wait else 1):
        size = os.fstat(fd).st_size
        holder = LockHolder.parse(os.pread(fd, size, 0).decode("utf-8", "replace")) if size else None
        if holder is not None or not wait:
            return holder
        time.sleep(0.025)
    return None


def _pid_namespace() -> str:
    """This process's pid namespace (``pid:[4026531836]``), "" where /proc does not say."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""




def _warn_stale(folder: Path, previous: LockHolder, why: str) -> None:
    warnings.warn(f"{folder}: taking over the lock of {previous.describe()}: {why}", StaleLockWarning, stacklevel=4)
