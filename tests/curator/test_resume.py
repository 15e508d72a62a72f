"""A run killed with SIGKILL midway and re-run loses no finished clip and duplicates none."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

import vfm_curator
from vfm_curator.shot_detectors.spans import shots_from_cuts
from vfm_curator.synth import make_video
from vfm_curator.tasks import clip_id

SHOTS = [36, 30, 42]


def _expected_ids(videos: list[Path]) -> set[str]:
    ids = set()
    for path in videos:
        cuts = [36, 66]
        ids |= {clip_id(str(path), a, b) for a, b in shots_from_cuts(cuts, sum(SHOTS))}
    return ids


def test_sigkill_midway_then_rerun_loses_and_duplicates_no_clip(tmp_path, ray_session):
    videos = [tmp_path / "in" / f"v{i:02d}.mp4" for i in range(10)]
    for i, path in enumerate(videos):
        make_video(path, SHOTS, seed=i, width=160, height=96)
    out = tmp_path / "out"
    config = tmp_path / "c.json"
    # one worker per stage keeps the first run slow enough to be killed in the middle
    stages = ["decode", "split", "stitch", "transcode", "embed", "caption", "filter", "write"]
    config.write_text(json.dumps({"run": {"workers": {s: 1 for s in stages}, "num_cpus": 2},
                                  "options": {"transcode": {"preset": "medium"}}}))
    cmd = [sys.executable, "-m", "vfm_cli.main", "curate", str(tmp_path / "in"), "-o", str(out),
           "--config", str(config), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    records = out / ".state" / "videos"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if records.is_dir() and len(list(records.glob("*.json"))) >= 2:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)  # the real thing: no handler, no cleanup
        proc.wait(timeout=30)
    finally:
        try:  # Ray's helper processes of the killed run (same session as the child we started)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(0.5)  # a worker may still finish the write it was doing; that is fine too
    finished = {p.stem: p.stat().st_mtime_ns for p in records.glob("*.json")}
    # a video killed after its commit was written and before its record: its clips are done, and the
    # next run carries the commit out first and skips it (io/commits.py), so it counts as finished
    committed = {p.stem for p in (out / ".state" / "commits").glob("*.json")}
    assert 2 <= len(finished) < len(videos), len(finished)
    parts = {p.stem: p.stat().st_mtime_ns for p in (out / ".state" / "parts").glob("*.parquet")}

    summary = vfm_curator.curate([str(tmp_path / "in")], out, {"run": {"runner": "ray"}})

    done = len(set(finished) | committed)
    assert (summary.skipped, summary.processed) == (done, len(videos) - done), committed
    assert not list((out / ".state" / "commits").glob("*.json")), "a commit of the killed run was left"
    # finished videos were not redone: their records and metadata parts are untouched
    for vid, mtime in finished.items():
        if vid in committed:  # killed while carrying its commit out: the next run writes its record again
            continue
        assert (records / f"{vid}.json").stat().st_mtime_ns == mtime
        assert (out / ".state" / "parts" / f"{vid}.parquet").stat().st_mtime_ns == parts[vid]
    ids = pq.read_table(out / "clips.parquet").column("id").to_pylist()
    assert len(ids) == len(set(ids)), "duplicated clips"
    assert set(ids) == _expected_ids(videos), "lost or unexpected clips"
    assert {p.stem for p in (out / "clips").glob("*.mp4")} == set(ids)
    assert not [p for p in out.rglob("*.tmp")], "temporary files of the killed run were left behind"
    assert (out / "failures.jsonl").read_text() == ""
