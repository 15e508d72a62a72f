"""A video that decodes well short of the length its container declares (a download cut off, a
damaged file) keeps the clips it has, and says so: ``decoded_short`` in its record, a count in the
summary, a line in the report naming it with both lengths, and a line from ``vfm curate``."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_curator.stages.decode import decoded_short
from vfm_curator.synth import make_video


def test_decoded_short_needs_more_than_half_a_second_and_five_percent():
    assert decoded_short(0.0, 1.0) is None  # no declared length
    assert decoded_short(7.0, 6.7) is None  # within 0.5 s
    assert decoded_short(60.0, 57.5) is None  # within 5 %
    assert decoded_short(7.0, 4.875) == {"declared_s": 7.0, "decoded_s": 4.875}


def test_a_cut_off_video_keeps_its_clips_and_is_named_as_decoded_short(tmp_path):
    src = tmp_path / "in"
    make_video(src / "whole.mkv", [48, 48], seed=1)  # 4 s at 24 fps, one cut at 2 s
    make_video(src / "cut.mkv", [48, 48], seed=2)
    data = (src / "cut.mkv").read_bytes()
    (src / "cut.mkv").write_bytes(data[: int(len(data) * 0.55)])  # Matroska declares 4 s in its header
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["curate", str(src), "-o", str(out), "--runner", "serial", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "decoded short: 1 video ended well before the length the file declares" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["decoded_short"], summary["failures"]) == (1, 0)
    records = [json.loads(p.read_text()) for p in (out / ".state" / "videos").glob("*.json")]
    records = {r["source"].rsplit("/", 1)[-1]: r for r in records}
    short = records["cut.mkv"]["meta"]["decoded_short"]
    assert short["declared_s"] == 4.0 and 1.0 < short["decoded_s"] < 3.5
    assert "decoded_short" not in records["whole.mkv"]["meta"]
    assert records["cut.mkv"]["clips"] >= 1  # what decoded is kept
    report = (out / "report.html").read_text()
    assert 'id="decoded-short">1 video decoded short of the length it declares' in report
    assert "cut.mkv (" in report and "whole.mkv (" not in report
