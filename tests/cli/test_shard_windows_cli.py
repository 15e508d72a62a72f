"""``vfm shard``'s run table for windows: a top-up (``--windows`` raised on a resumed run) shows the
clips it added windows to, not "0 clips"; clips that ``windows = 0``'s frame cap cut short are
counted and warned about. Real curated H264 clips, the serial runner."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tests.curator.test_shard_windows import FRAMES, SIZE, _cap_at
from tests.curator.test_shard_windows import clip  # noqa: F401 (a fixture: one 40-frame shot, 4 windows of 9)
from vfm_cli.main import app


def _flat(output: str) -> str:
    return " ".join(output.replace("│", " ").split())


def _shard(clips: Path, out: Path, *options: str):
    result = CliRunner().invoke(app, ["shard", str(clips), "-o", str(out), "--tokenizer", "pixel", "--text-encoder", "hash",
                                      "--runner", "serial", "--no-progress", "--resolution", "x".join(map(str, SIZE)),
                                      "--frames", str(FRAMES), *options])
    assert result.exit_code == 0, result.output
    return _flat(result.output)


def test_a_top_up_run_shows_the_clips_topped_up_not_zero_clips(clip, tmp_path):
    _shard(clip, tmp_path / "s", "--windows", "1")
    text = _shard(clip, tmp_path / "s", "--windows", "0")
    assert json.loads((tmp_path / "s" / "summary.json").read_text())["topped_up"] == 1
    assert "written now 1 topped up (windows added), 3 samples" in text
    assert "0 clips" not in text


def test_clips_cut_short_by_the_all_windows_frame_cap_are_in_the_table_and_warned_about(clip, tmp_path, monkeypatch):
    _cap_at(monkeypatch, 2 * FRAMES)  # 2 of the 4 windows
    text = _shard(clip, tmp_path / "s")
    assert "written now 1 clips, 2 samples" in text and "cut short now (windows = 0 frame cap) 1" in text
    assert "warning: 1 of the 1 clips written now filled more windows than they got: windows = 0 keeps at most" in text
    assert "MiB of frames per clip; set windows (--windows N) to take N windows of every clip" in text


def test_a_run_without_cut_short_clips_shows_zero_and_no_warning(clip, tmp_path):
    text = _shard(clip, tmp_path / "s")
    assert "cut short now (windows = 0 frame cap) 0" in text and "filled more windows" not in text
