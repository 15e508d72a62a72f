"""Loader worker processes end soon after the process that reads from them is killed (they used to
wait forever on their full queues as orphans)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

MAIN = textwrap.dedent("""
    import sys, time
    from vfm_data import make_loader
    loader = make_loader(sys.argv[1], num_workers=2, patch_size=2, batch_size=2, max_seq_len=16, packing_buffer=8, streams=4)
    next(loader)
    print(*[w.pid for w in loader._workers], flush=True)
    time.sleep(120)
""")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"  # a zombie nobody reaps here is dead
    except FileNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc (Linux)")
def test_loader_workers_end_within_seconds_when_the_main_process_is_killed(small_dataset):
    main = subprocess.Popen([sys.executable, "-c", MAIN, str(small_dataset)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    workers = [int(p) for p in main.stdout.readline().split()]
    try:
        assert len(workers) == 2 and all(alive(w) for w in workers)
        main.send_signal(signal.SIGKILL)
        main.wait()
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and any(alive(w) for w in workers):
            time.sleep(0.05)
        assert not any(alive(w) for w in workers), "loader workers still alive 5 s after their main process was killed"
    finally:
        for w in workers:
            if alive(w):
                os.kill(w, signal.SIGKILL)
        main.stdout.close()
