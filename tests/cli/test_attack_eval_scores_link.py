"""Attack: a folder of generated videos from someone else holding ``scores.json``, a symbolic link to
a file of the victim's (``~/.bashrc``, a config). ``vfm eval VIDEOS`` writes ``VIDEOS/scores.json`` by
default, and wrote through the link: the victim's file was overwritten with the scores. Now the link
itself is replaced by the new file; the file it pointed at is untouched (real videos, the real command)."""

from __future__ import annotations

import json
import os

from typer.testing import CliRunner

from tests.cli.test_eval import _videos
from vfm_cli.main import app


def test_eval_replaces_a_scores_json_link_and_never_writes_through_it(tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    prompts = _videos(videos)
    victim = tmp_path / "home" / ".bashrc"
    victim.parent.mkdir()
    victim.write_text("export PATH=/usr/bin\n")
    os.symlink(victim, videos / "scores.json")
    result = CliRunner().invoke(app, ["eval", str(videos), "--prompts", str(prompts)])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "export PATH=/usr/bin\n"  # untouched
    assert not (videos / "scores.json").is_symlink()
    assert json.loads((videos / "scores.json").read_text())["shapes"]["summary"]["colour_correct"] == 2
    assert sorted(p.name for p in videos.iterdir()) == ["0000.mp4", "0001.mp4", "prompts.txt", "scores.json"]  # no temp left
