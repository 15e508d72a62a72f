"""vfm_plugins.FolderLock across real processes: a live holder refuses a second run naming itself,
a dead holder's lock is taken over with a warning, a clean exit leaves no lock behind."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.planted_links import plant_link
from vfm_plugins import (LOCK_NAME, FolderLock, FolderLockedError, HeldOnAnotherHostError, LockHolder, LockLinkError,
                         StaleLockWarning, folder_lock)

HOLD = textwrap.dedent("""
    import sys, time
    from vfm_plugins import FolderLock
    lock = FolderLock(sys.argv[1], command="holder --of the folder").acquire()
    print("held", flush=True)
    if sys.argv[2] == "sleep":
        time.sleep(120)
    elif sys.argv[2] == "release":
        lock.release()
    # "exit": leave without releasing (as a crash past the lock would)
""")


def hold(folder: Path, mode: str = "sleep") -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), mode], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    proc.stdout.close()
    return proc


@pytest.fixture
def holder(tmp_path):
    proc = hold(tmp_path / "run")
    yield proc
    proc.kill()
    proc.wait()


def test_a_second_run_is_refused_naming_the_holder(tmp_path, holder):
    with pytest.raises(FolderLockedError) as caught:
        FolderLock(tmp_path / "run").acquire()
    message = str(caught.value)
    assert f"pid {holder.pid} on host {socket.gethostname()}" in message
    assert "command 'holder --of the folder'" in message and "started 20" in message
    assert str(tmp_path / "run" / LOCK_NAME) in message and "\n" not in message
    assert caught.value.holder.pid == holder.pid


def test_the_lock_of_a_killed_run_is_taken_over_with_a_warning(tmp_path, holder):
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with pytest.warns(StaleLockWarning, match=f"pid {holder.pid}"):
        lock = FolderLock(tmp_path / "run", command="second").acquire()
    assert lock.holder.pid == os.getpid() and lock.holder.command == "second"
    lock.release()
    assert not (tmp_path / "run" / LOCK_NAME).exists()


def test_a_clean_release_leaves_no_lock_and_no_warning(tmp_path, recwarn):
    hold(tmp_path / "run", "release").wait()
    assert not (tmp_path / "run" / LOCK_NAME).exists()
    with FolderLock(tmp_path / "run"):
        assert (tmp_path / "run" / LOCK_NAME).is_file()
    assert not [w for w in recwarn.list if issubclass(w.category, StaleLockWarning)]


def test_the_kernel_releases_the_lock_when_the_holder_exits_without_releasing(tmp_path):
    proc = hold(tmp_path / "run", "exit")
    assert proc.wait() == 0
    with pytest.warns(StaleLockWarning, match="ended without releasing"):
        FolderLock(tmp_path / "run").acquire().release()


def test_a_lock_left_on_another_host_is_never_taken_over_silently(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    other = {"pid": 4242, "host": "elsewhere-node-7", "started": "2024-01-01T00:00:00+0000", "command": "vfm train x.toml"}
    (folder / LOCK_NAME).write_text(json.dumps(other))
    with pytest.raises(FolderLockedError, match="pid 4242 on host elsewhere-node-7.*delete the lock file"):
        FolderLock(folder).acquire()
    assert json.loads((folder / LOCK_NAME).read_text()) == other  # untouched


def test_the_lock_is_reentrant_in_one_process_and_released_by_the_outermost(tmp_path, holder):
    folder = tmp_path / "mine"
    with FolderLock(folder):
        with FolderLock(folder):
            pass
        assert (folder / LOCK_NAME).is_file()  # the inner release gave nothing back
        probe = subprocess.run([sys.executable, "-c", HOLD, str(folder), "release"], capture_output=True, text=True)
        assert probe.returncode == 1 and f"pid {os.getpid()}" in probe.stderr
    assert not (folder / LOCK_NAME).exists()


def test_two_processes_racing_for_a_folder_never_both_hold_it(tmp_path):
    race = textwrap.dedent("""
        import sys, time
        from vfm_plugins import FolderLock, FolderLockedError
        wins = 0
        for i in range(200):
            try:
                with FolderLock(sys.argv[1]):
                    with open(sys.argv[2], "a") as fh:
                        fh.write("in\\n")
                    time.sleep(0.001)
                    with open(sys.argv[2], "a") as fh:
                        fh.write("out\\n")
                wins += 1
            except FolderLockedError:
                pass
        print(wins)
    """)
    log = tmp_path / "log"
    procs = [subprocess.Popen([sys.executable, "-c", race, str(tmp_path / "run"), str(log)], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    wins = [int(p.communicate()[0]) for p in procs]
    lines = log.read_text().split()
    assert sum(wins) > 0 and len(lines) == 2 * sum(wins)
    assert lines == ["in", "out"] * sum(wins)  # never two "in" in a row: one holder at a time


DYING = textwrap.dedent("""
    import ctypes, os, platform, sys, threading, time
    from vfm_plugins import FolderLock
    FolderLock(sys.argv[1], command="dying holder").acquire()
    # another thread lives on for a while after the main thread has gone, as a killed torch run's
    # threads do while they leave a write: the process is a zombie, its files (the flock) still open
    threading.Thread(target=lambda: (time.sleep(float(sys.argv[2])), os._exit(0))).start()
    print("held", flush=True)
    SYS_EXIT = {"x86_64": 60, "aarch64": 93}[platform.machine()]
    ctypes.CDLL(None).syscall(SYS_EXIT, 0)  # ends this thread only
""")


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine not in ("x86_64", "aarch64"),
                    reason="needs Linux's thread-only exit syscall")
def test_a_holder_whose_process_is_exiting_is_waited_for_and_then_taken_over(tmp_path):
    import time

    proc = subprocess.Popen([sys.executable, "-c", DYING, str(tmp_path / "run"), "1.5"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    while _state(proc.pid) != "Z":  # main thread gone: what `kill -9` of a busy run looks like at first
        time.sleep(0.01)
    started = time.monotonic()
    with pytest.warns(StaleLockWarning, match=f"pid {proc.pid}.*ended without releasing"):
        lock = FolderLock(tmp_path / "run", command="rerun").acquire()
    assert 0.5 < time.monotonic() - started < 10  # waited for the last thread, not refused at once
    assert lock.holder.command == "rerun"
    lock.release()
    proc.wait()


def test_a_link_planted_at_the_lock_file_is_refused_naming_it_and_its_target_untouched(tmp_path):
    """An output folder from elsewhere holding ``.vfm-lock -> ~/.bashrc``: taking the lock truncated
    and wrote the linked file. The link is refused, not removed: a removal is not atomic with its
    check, and a run started beside this one lost its real lock file to it."""
    folder = tmp_path / "out"
    victim = plant_link(folder / LOCK_NAME, tmp_path / "home")
    with pytest.raises(LockLinkError, match=r"\.vfm-lock is a symbolic link \(to .*home.*\).*remove the link"):
        FolderLock(folder, command="vfm test").__enter__()
    assert (folder / LOCK_NAME).is_symlink() and victim.read_text() == "precious"
    (folder / LOCK_NAME).unlink()
    with FolderLock(folder, command="vfm test"):
        assert "vfm test" in (folder / LOCK_NAME).read_text()


@pytest.mark.parametrize("flock", [True, False], ids=["flock", "no-flock"])
def test_a_lock_left_on_another_host_is_taken_over_only_as_the_holder_a_process_there_found_gone(tmp_path, monkeypatch, flock):
    # no-flock: a shared filesystem mounted without flock (Lustre's default), where the file's content decides
    if not flock:
        monkeypatch.setattr(folder_lock, "fcntl", None)
    folder = tmp_path / "run"
    folder.mkdir()
    other = LockHolder(4242, "elsewhere-node-7", "2024-01-01T00:00:00+0000", "vfm train x.toml")
    (folder / LOCK_NAME).write_text(other.dumps())
    for gone in (None, dataclasses.replace(other, pid=4243), dataclasses.replace(other, started="2024-01-02T00:00:00+0000")):
        with pytest.raises(HeldOnAnotherHostError, match="pid 4242 on host elsewhere-node-7.*delete the lock file"):
            FolderLock(folder, gone=gone).acquire()
        assert LockHolder.parse((folder / LOCK_NAME).read_text()) == other  # untouched
    with pytest.warns(StaleLockWarning, match="pid 4242 on host elsewhere-node-7.*has no such process any more"):
        lock = FolderLock(folder, gone=other).acquire()
    assert lock.holder.pid == os.getpid()
    lock.release()


def test_processes_taking_over_a_stale_lock_without_flock_never_both_hold_it(tmp_path):
    """Each process finds the lock a crashed run left (its pid ended) before nearly every try: the
    takeover marker lets one of them remove it; both removed it and both held the folder."""
    race = textwrap.dedent("""
        import json, os, socket, sys, time, warnings
        from vfm_plugins import FolderLock, FolderLockedError, LockHolder, folder_lock
        folder_lock.fcntl = None  # a filesystem without flock: the lock file's content decides
        warnings.simplefilter("ignore")
        folder, log, dead = sys.argv[1], sys.argv[2], int(sys.argv[3])
        stale = LockHolder(dead, socket.gethostname(), "2024-01-01T00:00:00+0000", "crashed").dumps().encode()
        wins = 0
        for i in range(1000):
            try:
                with FolderLock(folder):
                    with open(log, "a") as fh:
                        fh.write("in\\n")
                    time.sleep(0.002)
                    with open(log, "a") as fh:
                        fh.write("out\\n")
                wins += 1
            except FolderLockedError:
                pass
            try:  # a run that crashed holding the folder: the next taker finds a stale lock
                fd = os.open(os.path.join(folder, ".vfm-lock"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.write(fd, stale)
                os.close(fd)
            except FileExistsError:
                pass
        print(wins)
    """)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    log = tmp_path / "log"
    (tmp_path / "run").mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", race, str(tmp_path / "run"), str(log), str(ended.pid)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate() for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    wins = [int(o[0]) for o in outs]
    lines = log.read_text().split()
    assert sum(wins) > 0 and lines == ["in", "out"] * sum(wins)  # never two "in" in a row: one holder at a time


def test_without_flock_a_holder_of_this_host_in_another_pid_namespace_is_not_taken_for_gone(tmp_path, monkeypatch):
    """Its pid means nothing here (another container with this host name): an ended pid in this
    namespace is no ended holder. Refused as another host's holder is, unless named gone."""
    monkeypatch.setattr(folder_lock, "fcntl", None)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    folder = tmp_path / "run"
    folder.mkdir()
    other = LockHolder(ended.pid, socket.gethostname(), "2024-01-01T00:00:00+0000", "vfm curate in a container",
                       pid_ns="pid:[1]")
    (folder / LOCK_NAME).write_text(other.dumps())
    with pytest.raises(HeldOnAnotherHostError, match=r"pid namespace pid:\[1\].*delete the lock file"):
        FolderLock(folder).acquire()
    assert LockHolder.parse((folder / LOCK_NAME).read_text()) == other and not list(folder.glob("*.takeover"))
    with pytest.warns(StaleLockWarning):
        lock = FolderLock(folder, gone=other).acquire()
    assert lock.holder.pid_ns == os.readlink("/proc/self/ns/pid")  # what this holder records of itself
    lock.release()
