"""Child processes that end when their parent dies: torchrun ranks, data-loader workers.

torchrun starts each rank in a session of its own, so killing the launcher (or its process group)
leaves the ranks training as orphans; a loader worker blocked on a full queue waits forever once the
process that reads the queue is gone. :func:`exit_with_parent` gives such a process a daemon thread
that ends it within ``interval`` seconds of its parent's death.

Why a polling thread and not ``prctl(PR_SET_PDEATHSIG)``: the kernel sends that signal when the
*thread* that forked the child exits, not the process, so a loader iterated from a helper thread
would lose its workers while the trainer still lives; and prctl is Linux only. The thread needs the
GIL only for a moment every ``interval`` seconds; torch releases it inside its kernels and
collectives.
"""

from __future__ import annotations

import os
import sys
import threading
import time

_watching: dict[int, int] = {}  # this process's pid -> the pid it watches (a forked child starts afresh)


def exit_with_parent(parent_pid: int | None = None, *, interval: float = 0.5, what: str = "process") -> None:
    """End this process (exit code 1, one line on stderr) soon after ``parent_pid`` dies.

    ``parent_pid`` defaults to the current parent. When it is this process's parent, its death is
    seen as a change of ``os.getppid()`` (the kernel re-parents orphans at once, so pid reuse cannot
    fool it); another pid (e.g. the process that asked a forkserver for this one) is polled for
    existence. Calling it again in the same process does nothing.
    """
    me = os.getpid()
    if me in _watching:
        return
    parent = os.getppid() if parent_pid is None else int(parent_pid)
    is_parent = parent == os.getppid()
    if not is_parent and not pid_exists(parent):
        _exit(parent, what)
    _watching[me] = parent

    def watch() -> None:
        while True:
            time.sleep(interval)
            gone = os.getppid() != parent if is_parent else not pid_exists(parent)
            if gone:
                _exit(parent, what)

    threading.Thread(target=watch, name=f"vfm-exit-with-parent-{parent}", daemon=True).start()


def pid_exists(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie counts as gone: it holds no locks and does no work)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a dead process nobody has reaped yet is a zombie: gone for our purpose
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return True


def _exit(parent: int, what: str) -> None:
    # the line goes to a pipe that may be full and unread now that the parent is gone: never wait on it
    threading.Timer(1.0, os._exit, (1,)).start()
    try:
        sys.stderr.write(f"vfm: {what} {os.getpid()} exits: its parent process {parent} is gone\n")
        sys.stderr.flush()
    except Exception:
        pass
    os._exit(1)
