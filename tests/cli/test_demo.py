"""``vfm demo`` in a reduced form: every stage runs for real and every output it lists opens."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value and not re.match(r"^(https?:|#|data:)", value):
                self.links.append(value)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    result = subprocess.run(
        [sys.executable, "-m", "vfm_cli.main", "demo", "-o", str(out), "--videos", "2",
         "--train-steps", "4", "--sample-steps", "2"],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out, result.stdout


def test_demo_prints_each_command_and_the_time_of_each_step(demo_run):
    out, stdout = demo_run
    for command in ("vfm curate", "vfm shard", "vfm train", "vfm generate", "vfm eval"):
        assert command in stdout
    summary = json.loads((out / "demo.json").read_text())
    assert set(summary["seconds"]) == {"input", "curate", "shard", "train", "generate", "eval", "total"}
    assert all(seconds > 0 for seconds in summary["seconds"].values())


def test_demo_generates_every_caption_and_scores_each_against_it(demo_run):
    out, stdout = demo_run
    summary = json.loads((out / "demo.json").read_text())
    captions = [json.loads(line)["caption"] for line in (out / "input" / "manifest.jsonl").read_text().splitlines()]
    assert summary["prompts"] == captions == (out / "prompts.txt").read_text().splitlines()
    scores = summary["scores"]
    assert [row["prompt"] for row in scores["per_video"]] == captions
    assert scores["summary"]["videos"] == scores["summary"]["scored"] == 2
    assert {"colour_correct", "motion_correct", "flat_background", "all_correct"} <= set(scores["summary"])
    assert json.loads((out / "videos" / "scores.json").read_text())["shapes"] == scores
    assert "prompt adherence (2 captions)" in stdout
    export = json.loads((out / "train" / "export" / "config.json").read_text())
    assert export["null_condition"] == {"kind": "text", "caption": ""} and export["cond_dropout"] > 0


def test_demo_video_decodes_with_the_trained_shape(demo_run):
    import av

    out, _ = demo_run
    with av.open(str(out / "videos" / "0000.mp4")) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        frames = list(container.decode(video=0))
    assert len(frames) == 8  # the demo shards 8-frame clips
    assert (frames[0].width, frames[0].height) == (32, 32)


def test_demo_pngs_load(demo_run):
    from PIL import Image

    out, _ = demo_run
    for png in (out / "videos" / "0000.png", out / "videos" / "contact_sheet.png", out / "train" / "loss_curve.png"):
        with Image.open(png) as image:
            image.load()
            assert image.size[0] > 0 and image.size[1] > 0


def test_demo_report_links_resolve(demo_run):
    out, _ = demo_run
    report = out / "curated" / "report.html"
    parser = _Links()
    parser.feed(report.read_text(encoding="utf-8"))
    assert parser.links, "the report links its clips and thumbnails"
    missing = [link for link in parser.links if not (report.parent / link).exists()]
    assert not missing


def test_demo_rerun_resumes_instead_of_redoing(demo_run, tmp_path):
    out, _ = demo_run
    victim = tmp_path / "bashrc"  # demo.json as a link planted in a demo folder from elsewhere: replaced, not written through
    victim.write_text("precious")
    (out / "demo.json").unlink()
    (out / "demo.json").symlink_to(victim)
    result = subprocess.run(
        [sys.executable, "-m", "vfm_cli.main", "demo", "-o", str(out), "--videos", "2",
         "--train-steps", "4", "--sample-steps", "2", "--no-ray"],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    curate = json.loads((out / "curated" / "summary.json").read_text())
    assert curate["skipped"] == 2 and curate["processed"] == 0
    assert victim.read_text() == "precious" and json.loads((out / "demo.json").read_text())["prompts"]


def test_demo_into_a_file_is_a_clear_error_that_touches_nothing(tmp_path):
    target = tmp_path / "not-a-folder"
    target.write_text("keep me")
    result = subprocess.run([sys.executable, "-m", "vfm_cli.main", "demo", "-o", str(target)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "is not a folder" in result.stderr
    assert target.read_text() == "keep me"
