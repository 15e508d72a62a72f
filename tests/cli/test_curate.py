"""``vfm curate``: runs the clipping pipeline, prints a summary, writes a report whose links resolve."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_curator.synth import make_video


def test_curate_command_writes_clips_summary_and_a_report_with_resolving_links(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [30, 30], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [40], seed=2)
    (tmp_path / "in" / "b.txt").write_text("a sidecar caption")
    (tmp_path / "in" / "broken.mp4").write_bytes(b"\x00" * 100)
    out = tmp_path / "out"
    config = tmp_path / "c.toml"
    config.write_text('[run]\nrunner = "serial"\n[options.split]\nmin_clip_s = 0.5\n')
    result = CliRunner().invoke(app, ["curate", str(tmp_path / "in"), "-o", str(out), "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert re.search(r"clips\s+│\s+3", result.output) and re.search(r"failures\s+│\s+1", result.output)
    assert re.search(r"decoders \(videos\)\s+│\s+pyav 2", result.output)  # which backend decoded, on CPU
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["videos"], summary["clips"], summary["failures"]) == (3, 3, 1)
    assert summary["hours_in"] == summary["hours_out"] == (60 + 40) / 24 / 3600
    rows = pq.read_table(out / "clips.parquet").to_pylist()
    assert {Path(r["source"]).name: r["caption"] for r in rows} == {"a.mp4": None, "b.mp4": "a sidecar caption"}
    failures = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert [Path(f["source"]).name for f in failures] == ["broken.mp4"]
    report = (out / "report.html").read_text()
    links = re.findall(r'(?:href|src)="([^"]+)"', report)
    assert len([link for link in links if link.endswith(".jpg")]) == 3
    for link in links:
        assert not link.startswith("/") and (out / link).is_file(), link
    # a second run finds everything done
    again = CliRunner().invoke(app, ["curate", str(tmp_path / "in"), "-o", str(out), "--config", str(config), "--no-progress"])
    assert again.exit_code == 0 and re.search(r"skipped \(finished before\)\s+│\s+3", again.output)


def test_curate_command_rejects_bad_options_and_inputs(tmp_path):
    runner = CliRunner()
    bad = tmp_path / "c.toml"
    bad.write_text("[run]\nrunnr = 1\n")
    result = runner.invoke(app, ["curate", str(tmp_path), "-o", str(tmp_path / "o"), "--config", str(bad)])
    assert result.exit_code != 0 and "unknown key" in result.output
    result = runner.invoke(app, ["curate", str(tmp_path / "nothing*.mp4"), "-o", str(tmp_path / "o"), "--runner", "serial"])
    assert result.exit_code == 1 and "matches no file" in result.output
    result = runner.invoke(app, ["curate", str(tmp_path), "-o", str(tmp_path / "o"), "--runner", "spark"])
    assert result.exit_code != 0 and "accepted: ray, serial" in result.output
