"""Typer renders every help text as rich markup: a bare ``[validation]`` or ``[shard]`` is read as a style
tag and vanishes from ``--help`` ("for vfm train's ;"). Each help text must print every character it holds."""

from __future__ import annotations

import pytest
import typer.main
from rich.text import Text

from vfm_cli.main import app


def _helps():
    root = typer.main.get_command(app)
    for name, command in root.commands.items():
        yield name, "docstring", command.help or ""
        for param in command.params:
            yield name, "/".join(getattr(param, "opts", [param.name])), getattr(param, "help", None) or ""


@pytest.mark.parametrize("command, what, text", [h for h in _helps() if "[" in h[2]],
                         ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None)
def test_every_bracket_in_a_help_text_is_printed(command, what, text):
    shown = Text.from_markup(text).plain
    assert shown.count("[") == text.count("["), f"vfm {command} {what}: rich prints {shown!r}"
