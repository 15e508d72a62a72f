"""Tables printed by the vfm commands lose no figure or name: whole lines in a file or a pipe (rich
assumes 80 columns there and cut "background_rms" to "backg…"), folded, never "…", in a narrow terminal."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_cli.tables import print_table

LONG_PATH = "/data/runs/" + "very-long-folder-name-" * 6 + "out/contact_sheet.png"
LONG_NUMBER = "12345.678901234567890123456789"


def _table() -> Table:
    table = Table(title=f"vfm curate -> {LONG_PATH}")
    for column in ("figure", "value", "file"):
        table.add_column(column)
    table.add_row("mean_background_rms_of_every_video", LONG_NUMBER, LONG_PATH)
    return table


def test_print_table_into_a_file_keeps_every_row_on_one_line_at_any_width():
    out = io.StringIO()
    print_table(_table(), Console(file=out, width=80))
    lines = out.getvalue().splitlines()
    assert "…" not in out.getvalue()
    assert any(f"vfm curate -> {LONG_PATH}" in line for line in lines)  # the title too, on one line
    row = next(line for line in lines if "mean_background_rms_of_every_video" in line)
    assert LONG_NUMBER in row and LONG_PATH in row


def test_print_table_in_a_narrow_terminal_folds_instead_of_cutting():
    out = io.StringIO()
    print_table(_table(), Console(file=out, width=60, force_terminal=True, color_system=None))
    text = out.getvalue()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 60  # the terminal's width is kept
    rows = [line.split("│")[1:-1] for line in text.splitlines() if line.startswith("│")]
    columns = ["".join(row[i].strip() for row in rows) for i in range(3)]  # each column's pieces, top to bottom
    assert columns == ["mean_background_rms_of_every_video", LONG_NUMBER, LONG_PATH]  # every character, folded


def test_vfm_plugins_piped_prints_each_plugin_on_one_whole_line():
    result = CliRunner().invoke(app, ["plugins"], env={"COLUMNS": "80"})  # what rich assumes in a pipe or CI log
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if " dit-cross " in line)
    assert "vfm_models" in row and "families" in row and "vfm-models" in row
    assert "text cross-attention + QK-norm" in row  # the description, not wrapped onto further lines
