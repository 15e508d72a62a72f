"""The report's "Time per stage" chart lists the stages in the pipeline's order, also for a re-run
that found every video finished (its timings then come only from the records)."""

from __future__ import annotations

import re

import vfm_curator
from vfm_curator.config import DEFAULT_STAGES
from vfm_curator.synth import make_video


def _stage_chart_labels(report: str) -> list[str]:
    chart = report.split("<h2>Time per stage</h2>", 1)[1].split("</figure>", 1)[0]
    return re.findall(r'text-anchor="end">([^<]+)</text>', chart)


def test_stage_chart_keeps_pipeline_order_when_a_rerun_skips_every_video(tmp_path, ray_session):
    make_video(tmp_path / "in" / "a.mp4", [30, 30], seed=3)
    out = tmp_path / "out"
    first = vfm_curator.curate([str(tmp_path / "in")], out, {"run": {"runner": "ray"}})
    assert first.processed == 1
    assert _stage_chart_labels((out / "report.html").read_text()) == list(DEFAULT_STAGES)
    again = vfm_curator.curate([str(tmp_path / "in")], out, {"run": {"runner": "ray"}})
    assert (again.processed, again.skipped) == (0, 1)
    assert _stage_chart_labels((out / "report.html").read_text()) == list(DEFAULT_STAGES)  # was alphabetical
