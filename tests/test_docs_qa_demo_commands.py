"""`vfm demo` prints each command "so you can repeat any step by hand" (README, `vfm demo --help`): the
printed line must be the command itself, whole, however narrow the terminal and whatever the folder
is called. The stages' processes are replaced by a failing stand-in: only the printing is under test."""

from __future__ import annotations

import shlex
import subprocess

from typer.testing import CliRunner

import vfm_cli.demo.run as demo_run
from vfm_cli.main import app


def test_the_printed_command_is_one_copyable_line_with_the_folder_name_intact(tmp_path, monkeypatch):
    ran = []

    def stand_in(args, *a, **k):  # the stage's `python -m vfm_cli.main ...`: recorded, then failing
        ran.append(list(args[3:]))
        return subprocess.CompletedProcess(args, 3)

    monkeypatch.setattr(demo_run.subprocess, "run", stand_in)
    out = tmp_path / "demo [one] with a long folder name to pass the terminal width"
    result = CliRunner().invoke(app, ["demo", "-o", str(out), "--videos", "1", "--no-ray"], env={"COLUMNS": "60"})

    assert result.exit_code == 1
    assert ran and ran[0][0] == "curate"
    lines = [line for line in result.output.splitlines() if line.startswith("== curate  $ ")]
    assert len(lines) == 1, result.output
    assert shlex.split(lines[0].removeprefix("== curate  $ ")) == ["vfm", *ran[0]]
