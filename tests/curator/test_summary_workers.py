"""The run summary and report.html show fused stages (one Ray worker runs them in turn) as one
group with its worker count, so 8 stages fused on 2 CPUs read as 2 workers and not as 8 x 2; stages
that ran alone (the serial runner) are listed one by one."""

from __future__ import annotations

import json

from vfm_curator.api import curate
from vfm_curator.config import DEFAULT_STAGES
from vfm_curator.synth import make_video


def test_fused_stages_show_as_one_entry_and_serial_stages_one_by_one(tmp_path, ray_session):
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [24, 24], seed=2)
    fused = curate(tmp_path / "in", tmp_path / "ray", {"run": {"runner": "ray"}})
    assert fused.clips == 4 and fused.fused == [list(DEFAULT_STAGES)]
    n = fused.workers["decode"]
    assert 1 <= n <= 2 and set(fused.workers.values()) == {n}
    assert fused.workers_text() == f"decode..write={n} (8 stages fused)"
    assert json.loads((tmp_path / "ray" / "summary.json").read_text())["fused"] == [list(DEFAULT_STAGES)]
    report = (tmp_path / "ray" / "report.html").read_text()
    workers = "1 worker" if n == 1 else f"{n} workers"
    assert f"decode..write fused (8 stages, {workers})" in report  # in the time-per-stage chart's title
    assert f"{workers} ·" not in report and f"· {workers}" not in report  # no fused stage claims workers of its own
    assert "balancer measured" not in report  # a fused stage's own share, measured on few calls, is left out
    alone = curate(tmp_path / "in", tmp_path / "serial", {"run": {"runner": "serial"}})
    assert alone.fused == [] and alone.workers_text() == ", ".join(f"{s}=1" for s in DEFAULT_STAGES)
    report = (tmp_path / "serial" / "report.html").read_text()
    assert "fused (" not in report and report.count("1 worker") >= len(DEFAULT_STAGES)
