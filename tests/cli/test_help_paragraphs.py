"""A command's --help prints each paragraph of its description as prose wrapped to the terminal: Typer's
rich mode kept the docstring's line breaks, so at 80 columns a paragraph came out as ragged rows broken
at the source's margin ("... (also when their file, caption" / "or options changed since: ...")."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest

from vfm_cli.main import app

PARAGRAPHED = {c.name: inspect.getdoc(c.callback).split("\n\n")[1:] for c in app.registered_commands
               if len(inspect.getdoc(c.callback).split("\n\n")) > 1}


@pytest.mark.parametrize("command", sorted(PARAGRAPHED))
def test_each_paragraph_of_a_commands_help_is_one_line_on_a_wide_terminal(command):
    env = {**os.environ, "COLUMNS": "1000", "NO_COLOR": "1", "TERM": "dumb"}
    out = subprocess.run([sys.executable, "-m", "vfm_cli.main", command, "--help"], capture_output=True, text=True,
                         env=env, timeout=120).stdout
    lines = [line.strip() for line in out.splitlines()]
    for paragraph in PARAGRAPHED[command]:
        words = paragraph.split()
        head, tail = " ".join(words[:4]), " ".join(words[-4:])
        assert any(line.startswith(head) and line.endswith(tail) for line in lines), \
            f"vfm {command} --help breaks the paragraph starting {head!r}:\n{out}"
