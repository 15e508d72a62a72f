"""Text from data never drives the user's terminal: control characters (ESC sequences, OSC 8 links,
OSC 52 clipboard writes, CR), bidi overrides and rich markup in a lock file's holder, a manifest's
columns or an installed plugin's text are printed as visible escapes by ``vfm_plugins.printable``;
ordinary text prints exactly as before."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_plugins import LOCK_NAME, FolderLock, FolderLockedError, printable
from tests.conftest import plugin_env

# an OSC 52 clipboard write, a screen clear, an OSC 8 hyperlink, a CR that overwrites the line, a bidi override
HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b]8;;http://evil.example\x07click\x1b]8;;\x07\rok \u202egpm.exe"
CONTROLS = ("\x1b", "\x07", "\r", "\u202e", "\x9b")


def visible(text: str) -> bool:
    return not any(c in text for c in CONTROLS)


@pytest.mark.parametrize("text", ["clip_0001.mp4", "café 東京 vidéo [x].mp4", "a b\tc\nnext line", "", "<b>&'\""])
def test_printable_leaves_ordinary_text_unchanged(text):
    assert printable(text) == text


def test_printable_escapes_every_terminal_control_and_bidi_override():
    assert printable(HOSTILE) == ("\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\x1b]8;;http://evil.example\\x07click\\x1b]8;;\\x07"
                                  "\\rok \\u202egpm.exe")
    assert printable("a\x9b31mb\x7f") == "a\\x9b31mb\\x7f"  # C1 CSI and DEL
    # a file name that is not UTF-8 (surrogateescape) prints instead of raising UnicodeEncodeError
    assert printable(b"bad\xffname.mp4".decode("utf-8", "surrogateescape")) == "bad\\udcffname.mp4"
    assert printable(ValueError("x\x1by")) == "x\\x1by"


def test_a_lock_files_holder_is_named_with_its_controls_escaped(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK_NAME).write_text(json.dumps(
        {"pid": 4242, "host": "node-7" + HOSTILE, "started": "2024\x1b[8m", "command": "vfm train " + HOSTILE}))
    with pytest.raises(FolderLockedError) as caught:
        FolderLock(folder).acquire()
    message = str(caught.value)
    assert visible(message), repr(message)
    assert "on host node-7\\x1b]52;c;ZXZpbA==\\x07" in message and "started 2024\\x1b[8m" in message
    assert "\\u202egpm.exe" in message  # the command too, bidi override included
    # an ordinary holder reads as it always did
    (folder / LOCK_NAME).write_text(json.dumps({"pid": 4242, "host": "node-7", "started": "2024", "command": "vfm train"}))
    with pytest.raises(FolderLockedError, match="pid 4242 on host node-7, started 2024, command 'vfm train'"):
        FolderLock(folder).acquire()
    assert socket.gethostname() != "node-7"


def test_vfm_curate_error_quoting_a_manifest_column_prints_it_escaped(tmp_path):
    manifest = tmp_path / "videos.csv"
    manifest.write_text(f"video_file,{HOSTILE}\nx.mp4,y\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["curate", str(manifest), "-o", str(tmp_path / "out"), "--runner", "serial", "--no-progress"])
    assert result.exit_code == 1
    assert visible(result.stderr), repr(result.stderr)
    assert "has no 'path' (columns/keys: video_file, \\x1b]52;c;ZXZpbA==\\x07\\x1b[2J" in result.stderr
    # ordinary column names: the same line as before, unchanged
    manifest.write_text("video_file,notes\nx.mp4,y\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["curate", str(manifest), "-o", str(tmp_path / "out"), "--runner", "serial", "--no-progress"])
    assert result.stderr.strip().splitlines()[-1] == f"error: {manifest}: entry 1 has no 'path' (columns/keys: video_file, notes)"


def test_vfm_plugins_table_shows_a_plugins_text_as_text_not_markup_or_controls(tmp_path):
    """A real installed distribution (dist-info with entry points) whose import fails with a hostile
    message and whose metadata holds rich markup: the table prints both as they read."""
    dist = tmp_path / "vfm_plugin_hostile-0.0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vfm-plugin-hostile\nVersion: 0.0.1\n")
    (dist / "entry_points.txt").write_text("[vfm_models]\nhostile = vfm_plugin_hostile\n")
    (tmp_path / "vfm_plugin_hostile.py").write_text(
        f"raise ImportError({('[link=http://evil.example]see[/link] [red]boom[/red] ' + HOSTILE)!r})\n")
    env = {**plugin_env([tmp_path]), "COLUMNS": "400"}
    result = subprocess.run([sys.executable, "-m", "vfm_cli.main", "plugins"], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if "vfm-plugin-hostile" in line)
    assert visible(row), repr(row)
    assert "[link=http://evil.example]see[/link] [red]boom[/red]" in row and "\\x1b]52;c;ZXZpbA==" in row
    # built-in rows read as before
    dit = next(line for line in result.stdout.splitlines() if "│ dit " in line)
    assert [cell.strip() for cell in dit.split("│")[1:7]] == ["vfm_models", "families", "dit", "vfm-models", "0.1.0", "ok"]


def test_curate_progress_and_figures_show_a_plugin_stages_name_as_text():
    """The progress bars and the figures table (``vfm curate``/``vfm shard``) on a real rich console."""
    import io

    from rich.console import Console

    from vfm_cli.pipeline_cli import StageProgress, figures_table

    stage = "[red]x[/red]" + HOSTILE
    progress = StageProgress()
    buffer = io.StringIO()
    progress.progress.live.console = Console(file=buffer, force_terminal=False, width=400)
    progress.start(["decode", stage], total=2)
    progress.advance(stage, 1)
    progress.stop()
    table = io.StringIO()
    Console(file=table, force_terminal=False, width=400).print(figures_table([("workers", {"decode": 1, stage: 2})],
                                                                          title="vfm curate -> out[1]"))
    for text in (buffer.getvalue(), table.getvalue()):
        assert "[red]x[/red]\\x1b]52;c;ZXZpbA==" in text and visible(text), repr(text)
    assert "decode" in buffer.getvalue() and "vfm curate -> out[1]" in table.getvalue()
    assert "1/2" in buffer.getvalue()  # the count column is still there beside the bar
