"""vfm_plugins.exit_with_parent: a child whose parent is killed ends within a second or two."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

# The middle process starts a child in a session of its own (as torchrun starts its ranks, so a kill
# of the middle one's group misses it) and prints its pid; the child watches the middle one.
MIDDLE = textwrap.dedent("""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], start_new_session=True, stdout=subprocess.PIPE, text=True)
    print(child.pid, child.stdout.readline().strip(), flush=True)
    time.sleep(120)
""")
CHILD = textwrap.dedent("""
    import sys, time
    if sys.argv[-1] == "watch":
        from vfm_plugins import exit_with_parent
        exit_with_parent(interval=0.2, what="test child")
    print("ready", flush=True)
    time.sleep(120)
""")


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] == b"Z"  # dead, not reaped (no init reaps here)
    except FileNotFoundError:
        return True


def wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.05)
    return gone(pid)


@pytest.mark.parametrize("watch, ends", [("watch", True), ("nowatch", False)])
def test_a_watching_child_ends_soon_after_its_parent_is_killed(watch, ends):
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, CHILD, watch], stdout=subprocess.PIPE, text=True)
    pid_text, ready = middle.stdout.readline().split()
    child = int(pid_text)
    try:
        assert ready == "ready"
        middle.kill()
        middle.wait()
        assert wait_gone(child, 3.0) is ends
    finally:
        if not gone(child):
            os.kill(child, signal.SIGKILL)
        middle.stdout.close()
