"""``--help`` shows a flag (``--no-progress``, ``--help``, ``--version``) without a value type: Typer's rich help
printed ``<bool>`` after each, as if it took a value (``--no-progress <bool>``)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app

COMMANDS = sorted(c.name for c in app.registered_commands)


@pytest.mark.parametrize("args", [[], *([c] for c in COMMANDS)], ids=["vfm", *COMMANDS])
def test_help_shows_no_value_type_after_a_flag(args):
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output, result.output
    assert "--help" in result.output


def test_an_option_taking_a_value_still_shows_its_type():
    result = CliRunner().invoke(app, ["export", "--help"], env={"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"})
    assert "<path>" in result.output, result.output
