"""Typer renders every help text as rich markup: a bare ``[validation]`` or ``[shard]`` is read as a style
tag and vanishes from ``--help`` ("for vfm train's ;"), and an emoji code (``:name:``) would be replaced.
Each help text must print every character it holds (``\\[`` is how a text writes a literal bracket)."""

from __future__ import annotations

import pytest
import typer.main
from rich.text import Text

from vfm_cli.main import app


def _helps():
    root = typer.main.get_command(app)
    commands = [("vfm", root)] + [(f"vfm {name}", command) for name, command in root.commands.items()]
    for name, command in commands:
        yield name, "description", command.help or ""
        for param in command.params:
            yield name, "/".join(getattr(param, "opts", None) or [param.name]), getattr(param, "help", None) or ""


HELPS = [h for h in _helps() if h[2]]


def test_the_help_texts_include_the_bracketed_ones():
    # the property below holds vacuously if the walk finds no help text that writes a bracket
    assert any("[" in text for _, _, text in HELPS)


@pytest.mark.parametrize("command, what, text", HELPS, ids=[f"{c} {w}" for c, w, _ in HELPS])
def test_every_character_of_a_help_text_is_printed(command, what, text):
    shown = Text.from_markup(text).plain
    assert shown == text.replace("\\[", "["), f"{command} {what}: rich prints {shown!r}"
