"""`vfm --help` and each command's `--help` as a first-time user reads them: one summary row per
command, and no option whose help states one default while the `[default: ...]` tag shows another."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

COMMANDS = ["convert", "curate", "demo", "eval", "export", "generate", "plan", "plugins", "shard", "train"]


def vfm_help(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "1000", "NO_COLOR": "1", "TERM": "dumb"}
    result = subprocess.run([sys.executable, "-m", "vfm_cli.main", *args, "--help"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_command_list_gives_each_command_one_unbroken_summary():
    """Typer keeps the line breaks of a docstring's first paragraph in the command list: a summary
    wrapped at the source's margin printed as ragged rows under a wide terminal."""
    text = vfm_help()
    panel = text[text.index("Commands"):]
    rows = [line.strip("│ ").rstrip() for line in panel.splitlines()[1:] if line.startswith("│")]
    names = [row.split()[0] for row in rows if row and not row.startswith(" ")]
    assert names == COMMANDS
    assert len(rows) == len(COMMANDS), "a command's summary spans several rows:\n" + "\n".join(rows)


@pytest.mark.parametrize("command", ["plan", "generate", "eval", "curate", "shard", "demo"])
def test_no_option_shows_a_default_tag_that_contradicts_its_help(command):
    """An option documented as '(default: the config's ...)' whose sentinel value (0, None) is also shown
    as '[default: 0]' describes its default two ways."""
    for line in vfm_help(command).splitlines():
        said = re.search(r"\(default: ([^)]*)\)", line)
        tag = re.search(r"\[default: ([^\]]*)\]", line)
        if said and tag:
            assert tag.group(1).lower() in said.group(1).lower(), f"vfm {command}: {line.strip()}"
