"""``report.html``: every clip (kept and filtered, with why) with units, charts and failure groups,
hostile names and captions escaped, thumbnails that show the clip, and a page that runs in a real
browser (headless Chromium, Debian's ``chromium`` package) without a script error."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import vfm_curator
from vfm_curator.io.thumbnail import representative_frame
from vfm_curator.stages.write import WriteStage
from vfm_curator.synth import make_video, shot_frames
from vfm_curator.tasks import Clip, VideoTask

HOSTILE_NAME = '<img src=x onerror="document.body.dataset.pwned=1">"\'&.mp4'
HOSTILE_CAPTION = "</script><script>document.body.dataset.pwned=2</script> & <b>bold</b>"


@pytest.fixture(scope="module")
def curated(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report")
    inp = root / "in"
    make_video(inp / HOSTILE_NAME, [30, 30], seed=1)  # 2 clips
    (inp / (HOSTILE_NAME[:-4] + ".txt")).write_text(HOSTILE_CAPTION)
    make_video(inp / "b.mp4", [40, 12, 50], seed=3)  # 3 clips
    make_video(inp / "still.mp4", [40], seed=2, speed=0.0)  # 1 clip, filtered out (no motion)
    (inp / "broken.mp4").write_bytes(b"\x00" * 100)  # not a video
    summary = vfm_curator.curate([str(inp)], root / "out", {
        "run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.5}, "filter": {"min_motion": 0.003}},
    })
    assert summary.clips == 5
    return root / "out"


class _Page(HTMLParser):
    """Collects the clip table's rows (their attributes and cell texts), the figures and tagged elements."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict] = []
        self.figures: list[str] = []
        self.kinds: list[str] = []
        self.svgs = 0
        self._in_clips = self._in_fig = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("id") == "clips":
            self._in_clips = True
        elif tag == "tr" and self._in_clips and "data-status" in a:
            self.rows.append({**a, "cells": []})
        elif tag == "td" and self._in_clips and self.rows:
            self._cell = []
        elif tag == "li" and self._in_fig:
            self.figures.append("")
        elif tag == "ul" and a.get("class") == "figures":
            self._in_fig = True
        elif tag == "tr" and "data-kind" in a:
            self.kinds.append(a["data-kind"])
        elif tag == "svg":
            self.svgs += 1

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_clips = False
        elif tag == "ul":
            self._in_fig = False
        elif tag == "td" and self._cell is not None:
            self.rows[-1]["cells"].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._in_fig and self.figures:
            self.figures[-1] += data + " "


def _page(out: Path) -> tuple[str, _Page]:
    text = (out / "report.html").read_text(encoding="utf-8")
    page = _Page()
    page.feed(text)
    return text, page


def test_report_lists_every_clip_with_status_units_histograms_and_grouped_failures(curated):
    text, page = _page(curated)
    statuses = sorted(r["data-status"] for r in page.rows)
    assert statuses == ["filtered"] * 1 + ["kept"] * 5
    filtered = next(r for r in page.rows if r["data-status"] == "filtered")
    assert filtered["cells"][1].startswith("still.mp4") or "still.mp4" in filtered["cells"][2]
    assert filtered["cells"][-1].startswith("filtered: motion")
    kept = [r for r in page.rows if r["data-status"] == "kept"]
    assert all(r["cells"][-1] == "kept" and "96×64" in r["cells"] for r in kept)
    assert any(HOSTILE_CAPTION in cell for r in kept for cell in r["cells"])  # the caption, as text (then who made it)
    figures = " | ".join(" ".join(f.split()) for f in page.figures)
    assert "videos 4 2 ok, 2 failed" in figures and "clips kept 5 1 filtered out" in figures
    assert "input video 6.8 s" in figures and "clip video 6.8 s 100% of the input" in figures and " KB H264 in clips/" in figures and "wall time" in figures
    assert "{" not in figures and "hours_in" not in text  # no raw keys or Python dicts
    assert sorted(page.kinds) == ["all-filtered", "unusable-input"]
    assert "Check the filter limits" in text and "Re-encode or replace it" in text
    assert page.svgs == 3  # clip length, score: motion, time per stage
    assert ">decode</text>" in text and ">write</text>" in text


def test_report_escapes_hostile_file_names_and_captions(curated):
    text, _ = _page(curated)
    assert "<img src=x" not in text and "<script>document" not in text and "<b>bold" not in text
    assert "&lt;img src=x onerror=&quot;document.body.dataset.pwned=1&quot;&gt;" in text
    assert "&lt;/script&gt;&lt;script&gt;document.body.dataset.pwned=2" in text


def test_every_thumbnail_and_clip_link_resolves_inside_the_folder(curated):
    import re

    text, _ = _page(curated)
    links = re.findall(r'(?:href|src)="([^"]+)"', text)
    assert len([x for x in links if x.endswith(".jpg")]) == 6  # kept and filtered clips
    assert len({x for x in links if x.endswith(".mp4")}) == 5  # kept clips only
    for link in links:
        assert not link.startswith("/") and (curated / link).is_file(), link


def test_thumbnail_is_the_most_detailed_sample_not_a_fades_white_frame(tmp_path):
    rng = np.random.default_rng(0)
    first, last = list(shot_frames(2, 96, 64, rng))
    white = np.full_like(first, 255)
    assert representative_frame([white, first]) is first
    task = VideoTask(str(tmp_path / "v.mp4"))
    clip = Clip(0, 10, 0.0, 1.0, id="c1", mp4=b"\x00", samples=[first, white, last])  # the middle sample is white
    task.clips = [clip]
    WriteStage(out=str(tmp_path / "out")).process([task])
    from PIL import Image

    thumb = np.asarray(Image.open(tmp_path / "out" / "thumbs" / "c1.jpg")).astype(np.float32)
    assert thumb.std() > 10 and thumb.mean() < 240


_PROBE = """<script>
(function () {
  var result = {};
  var heads = document.querySelectorAll('#clips thead th');
  var col = -1;
  heads.forEach(function (th, i) { if (th.textContent.trim() === 'duration s') { col = i; } });
  heads[col].querySelector('button').click();
  var firstUp = document.querySelector('#clips tbody tr').cells[col].textContent;
  heads[col].querySelector('button').click();
  result.sorted = [firstUp, document.querySelector('#clips tbody tr').cells[col].textContent];
  var status = document.getElementById('clip-status');
  status.value = 'filtered';
  status.dispatchEvent(new Event('change'));
  result.visible = Array.prototype.filter.call(document.querySelectorAll('#clips tbody tr'), function (r) { return !r.hidden; }).length;
  result.shown = document.getElementById('clip-shown').textContent;
  document.body.setAttribute('data-probe', JSON.stringify(result));
})();
</script></body>"""


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="needs Debian's chromium package (apt-get install -y --no-install-recommends chromium)")
def test_report_runs_in_headless_chromium_without_script_errors_and_sorts_and_filters(curated, tmp_path):
    # the page as written, plus a probe that clicks a sort button and picks a status filter
    probe = curated / "report-probe.html"
    probe.write_text((curated / "report.html").read_text(encoding="utf-8").replace("</body>", _PROBE), encoding="utf-8")
    try:
        result = subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
             f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=120,
        )
    finally:
        probe.unlink()
    dom, log = result.stdout, result.stderr
    assert result.returncode == 0, log[-2000:]
    errors = [line for line in log.splitlines() if "CONSOLE" in line and ("Uncaught" in line or "Error" in line)]
    assert not errors, errors
    parser = _Attrs()
    parser.feed(dom)
    assert parser.body.get("data-script") == "ok" and "data-script-error" not in parser.html, parser.html
    assert "data-pwned" not in parser.body  # no hostile name or caption ran
    probe_result = json.loads(parser.body["data-probe"])
    assert probe_result["sorted"] == ["0.50", "2.08"]  # ascending, then descending
    assert probe_result["visible"] == 1 and probe_result["shown"] == "1 of 6 clips shown"


class _Attrs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.body: dict = {}
        self.html: dict = {}

    def handle_starttag(self, tag, attrs):
        if tag in ("body", "html"):
            setattr(self, tag, dict(attrs))


def test_every_failure_kind_but_the_generic_error_has_advice_in_the_report():
    from vfm_curator.failures import KINDS
    from vfm_curator.io.report import ADVICE

    assert sorted(k for k in KINDS if k not in ADVICE) == ["error"]  # "error": the cause's advice (CAUSE_ADVICE)


def test_the_report_keeps_the_changed_while_curated_notice_the_cli_prints(tmp_path):
    """Like the other notices of a run (options or inputs changed, copies): a Python caller's run
    has no terminal line, and the report is what is read later."""
    from vfm_curator.io.report import write_report
    from vfm_curator.pipelines.summary import Summary

    summary = Summary(out=str(tmp_path), videos=1, changed_while_curated=[str(tmp_path / "in" / "take.ts")])
    html = write_report(tmp_path, summary, [], []).read_text()
    assert "1 video changed while it was curated" in html and "take.ts" in html
