"""Killing the torchrun launcher ends its training ranks within seconds (torchrun starts ranks in
sessions of their own, so without a watchdog they trained on as orphans), and frees the run folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# configs/tiny.toml cut down to start fast and to run far longer than the test waits
SETS = ["train.steps=100000", "optim.warmup_steps=1", "checkpoint.interval=100000", "checkpoint.export=false",
        "logging.tensorboard=false", "logging.progress=false", "logging.loss_curve=false", "logging.peak_tflops=1.0",
        "logging.interval=1", "data.num_samples=32", "data.micro_batch=2", "model.options.hidden=16",
        "model.options.num_heads=2", "model.options.depth=1"]


def alive(pid: int) -> bool:
    """Running (a dead process that nobody reaps here stays a zombie: not alive)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except FileNotFoundError:
        return False


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_bytes().rsplit(b")", 1)[-1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                found.append(int(entry.name))
    return found


def wait_for(condition, seconds: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process parents from /proc (Linux)")
def test_killing_the_torchrun_launchers_process_group_ends_both_ranks_and_frees_the_run_folder(tmp_path):
    from vfm_plugins import FolderLock, StaleLockWarning

    out = tmp_path / "run"
    sets = [a for item in [*SETS, f"train.out_dir={out}"] for a in ("--set", item)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launcher = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                                 "-m", "vfm_cli.main", "train", str(ROOT / "configs" / "tiny.toml"), *sets],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    ranks: list[int] = []
    try:
        metrics = out / "metrics.jsonl"
        started = wait_for(lambda: metrics.is_file() and len(metrics.read_text().splitlines()) >= 2 or launcher.poll() is not None, 180, 0.5)
        assert started and launcher.poll() is None, f"no training step in 180 s (launcher exit code {launcher.poll()})"
        ranks = children(launcher.pid)
        assert len(ranks) == 2
        os.killpg(launcher.pid, signal.SIGKILL)  # the launcher leads its own group; the ranks are not in it
        launcher.wait()
        t0 = time.monotonic()
        assert wait_for(lambda: not any(alive(r) for r in ranks), 10.0), "ranks still training 10 s after the launcher died"
        print(f"ranks gone {time.monotonic() - t0:.2f} s after the launcher was killed")
        steps = len(metrics.read_text().splitlines())
        time.sleep(1.0)
        assert len(metrics.read_text().splitlines()) == steps  # nothing trains on
        # rank 0's lock went with it: released if rank 0 ended by its peer's error, freed by the
        # kernel (and taken over with a warning) if it ended by its own watchdog
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StaleLockWarning)
            FolderLock(out).acquire().release()
    finally:
        for pid in [launcher.pid, *ranks]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
