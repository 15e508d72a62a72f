"""``vfm shard`` from the shell, as a user runs it: buckets and fitting limits are command-line options
(no config file needed), bad values are refused naming the option and the accepted form before any
work, the summary says why clips failed (not only where the list is) and warns when clips were
blown up or cropped a lot. Real curated H264 clips, the serial runner."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import vfm_curator
from vfm_cli.main import app
from vfm_curator.synth import write_video


def _flat(output: str) -> str:
    return " ".join(output.replace("│", " ").split())


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    """A 12x16 (HxW) clip and a 9:16 64x36 phone clip, 8 frames each, captioned by a manifest."""
    root = tmp_path_factory.mktemp("cli")
    rows = []
    for name, (h, w) in {"tiny": (12, 16), "phone": (64, 36)}.items():
        frame = np.zeros((h, w, 3), np.uint8)
        frame[: h // 2] = (200, 40, 40)
        write_video(root / "in" / f"{name}.mp4", [frame] * 8, fps=24.0)
        rows.append(json.dumps({"path": str(root / "in" / f"{name}.mp4"), "caption": f"a {name} clip"}))
    (root / "in" / "manifest.jsonl").write_text("\n".join(rows) + "\n")
    vfm_curator.curate([root / "in" / "manifest.jsonl"], root / "clips",
                       {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.1}}})
    return root / "clips"


def _shard(clips: Path, out: Path, *options: str):
    return CliRunner().invoke(app, ["shard", str(clips), "-o", str(out), "--tokenizer", "pixel", "--text-encoder", "hash",
                                    "--runner", "serial", "--no-progress", *options])


def test_buckets_and_limits_on_the_command_line_shape_the_shards_and_failures_are_explained(clips, tmp_path):
    result = _shard(clips, tmp_path / "s", "--resolution", "32x32", "--resolution", "64x36", "--frames", "5",
                    "--frames", "7", "--max-upscale", "2")
    text = _flat(result.output)
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "s" / "buckets.json").read_text()).keys() == {"64x36x7"}
    assert f"failures: 1 clip(s), listed in {tmp_path / 's' / 'failures.jsonl'}" in text
    assert ("1 too-small (config), e.g.: too small: the 12x16 (HxW) clip would be upscaled 2.67x to fill its bucket "
            "32x32, more than max_upscale = 2.0") in text
    assert "upscaled now (most) 0" in text and "cropped now (most) 0" in text


def test_a_default_run_warns_that_a_tiny_clip_was_blown_up_and_cropped(clips, tmp_path):
    result = _shard(clips, tmp_path / "s", "--resolution", "32x32", "--frames", "5")
    text = _flat(result.output)
    assert result.exit_code == 0, result.output
    assert "upscaled now (most) 1 (2.67x)" in text and "cropped now (most) 2 (44% of the frame)" in text
    assert ("warning: 1 of the 2 clips written now were upscaled to fill their bucket, up to 2.7x (tiny.mp4, 12x16 (HxW) "
            "-> bucket 32x32x5); add smaller resolutions, or set max_upscale (--max-upscale) to refuse such clips") in text
    assert "were centre-cropped to their bucket's aspect ratio, cutting up to 44% of the frame (phone.mp4" in text


@pytest.mark.parametrize("options, option, says", [
    (["--resolution", "256"], "--resolution", "'256' is not HEIGHTxWIDTH in pixels; e.g. 256x256"),
    (["--resolution", "0x256"], "--resolution", "height and width must be at least 1 pixel"),
    (["--frames", "1"], "--frames", "frames must be a non-empty list of video frame counts >= 2"),
    (["--frame-stride", "0"], "--frame-stride", "frame_stride must be a whole number >= 1, got 0"),
    (["--max-upscale", "0.5"], "--max-upscale", "max_upscale must be a factor >= 1"),
    (["--max-crop", "1.5"], "--max-crop", "max_crop must be a fraction of the frame in [0, 1)"),
])
def test_bad_bucket_options_are_refused_naming_the_option_before_any_work(tmp_path, options, option, says):
    result = _shard(tmp_path / "no-clips", tmp_path / "s", *options)
    text = _flat(result.output)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for {option}" in text and says in text, text
    assert not (tmp_path / "s").exists()


def test_when_nothing_is_written_each_failure_kind_is_named_once_between_the_list_and_the_error(clips, tmp_path):
    result = _shard(clips, tmp_path / "s", "--resolution", "32x32", "--frames", "5", "--max-upscale", "1", "--max-crop", "0.3")
    text = _flat(result.output)
    assert result.exit_code == 1, result.output
    assert "error: no sample written: 1 of 2 clips failed" in text
    for kind, reason in (("too-small", "too small: the 12x16 (HxW) clip would be upscaled 2.67x"),
                         ("aspect-mismatch", "aspect ratio: the centre crop of the 64x36 (HxW) clip")):
        assert text.count(kind) == 1 and text.count(reason) == 1, text


def test_the_run_table_shows_seconds_per_stage(clips, tmp_path):
    text = _flat(_shard(clips, tmp_path / "s", "--resolution", "32x32", "--frames", "5").output)
    assert re.search(r"seconds per stage shard_decode=\d+\.\d, shard_tokenize=\d+\.\d, shard_text=\d+\.\d, write=\d+\.\d", text), text
