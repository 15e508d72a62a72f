"""Ctrl-C during ``vfm curate`` (a real SIGINT to the real command): exit 130 with one line saying
what is kept and how to go on, and the same command run again resumes, losing nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from vfm_curator.synth import make_video


def _curate(src, out) -> list[str]:
    return [sys.executable, "-m", "vfm_cli.main", "curate", str(src), "-o", str(out), "--runner", "serial", "--no-progress"]


def test_ctrl_c_during_curate_says_how_to_resume_and_the_rerun_loses_nothing(tmp_path):
    src = tmp_path / "in"
    cuts = {"a_small.mp4": make_video(src / "a_small.mp4", [24, 24], seed=1),
            # long enough to still be running when the first video's record appears
            "b_long.mp4": make_video(src / "b_long.mp4", [120, 120], width=640, height=360, seed=2)}
    out = tmp_path / "out"
    proc = subprocess.Popen(_curate(src, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while not list((out / ".state" / "videos").glob("*.json")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    os.kill(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, (stdout, stderr)
    assert stderr.strip().splitlines()[-1] == (f"interrupted: the videos that finished are kept in {out}; "
                                               "run the same command again to resume"), stderr
    again = subprocess.run(_curate(src, out), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["skipped"], summary["processed"], summary["failures"]) == (1, 1, 0)
    assert summary["clips"] == sum(len(c) + 1 for c in cuts.values())  # every shot of both videos
