"""Ctrl-C during ``vfm curate`` (a real SIGINT to the real command): exit 130 with one line saying
what is kept (counted: how many videos this run finished, none when none did) and the command that
resumes, and that command resumes, losing nothing."""

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
    command = f"vfm curate {src} -o {out} --runner serial --no-progress"
    assert stderr.strip().splitlines()[-1] == (
        f"interrupted: 1 video finished by this run is kept in {out}; clips.parquet, failures.jsonl and report.html "
        f"take them in when a run of the folder ends; videos not finished are done again; to resume: {command}"), stderr
    again = subprocess.run(_curate(src, out), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["skipped"], summary["processed"], summary["failures"]) == (1, 1, 0)
    assert summary["clips"] == sum(len(c) + 1 for c in cuts.values())  # every shot of both videos


def test_ctrl_c_before_any_video_finished_says_nothing_is_kept(tmp_path):
    src = tmp_path / "in"
    make_video(src / "long.mp4", [240, 240], width=640, height=360, seed=3)  # seconds to curate: SIGINT lands in it
    out = tmp_path / "out"
    proc = subprocess.Popen(_curate(src, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while not out.exists() and proc.poll() is None and time.monotonic() < deadline:  # the run took OUT's lock
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    os.kill(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, (stdout, stderr)
    assert not list((out / ".state" / "videos").glob("*.json")), "a video finished: the test interrupted too late"
    command = f"vfm curate {src} -o {out} --runner serial --no-progress"
    # the run removes the folder it made when it holds nothing yet (the interrupt came before the
    # write stage made clips/): the line says which, as the disk shows it
    expected = (f"interrupted before any video of this run finished: nothing is kept in {out}; to resume: {command}"
                if out.exists() else
                f"interrupted before any video finished: nothing was written ({out} does not exist); to start again: {command}")
    assert stderr.strip().splitlines()[-1] == expected, stderr


def test_ctrl_c_line_for_a_missing_folder_says_nothing_was_written_and_quotes_the_command(tmp_path, monkeypatch):
    from vfm_cli.commands._interrupted import curate_interrupted, shard_interrupted

    out = tmp_path / "never made"
    monkeypatch.setattr(sys, "argv", ["vfm", "curate", "in dir", "-o", str(out)])
    assert curate_interrupted(out, {}) == (f"interrupted before any video finished: nothing was written ({out} does not "
                                           f"exist); to start again: vfm curate 'in dir' -o '{out}'")
    monkeypatch.setattr(sys, "argv", ["vfm", "shard", "clips", "-o", str(out)])
    assert shard_interrupted(out, {}) == (f"interrupted before any shard was finished: nothing was written ({out} does not "
                                          f"exist); to start again: vfm shard clips -o '{out}'")
