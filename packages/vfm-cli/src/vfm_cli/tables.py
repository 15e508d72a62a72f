"""Printing rich tables so that no figure or name is lost: piped into a file or a CI log, rich assumes
80 columns and cuts what does not fit ("backg…"); here a table keeps the width its content needs.
Imported inside the commands (it imports rich), never at CLI start-up."""

from __future__ import annotations

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

_UNBOUNDED = 1_000_000  # measure a table as if the line had no end


def print_table(table: Table, console: Console | None = None) -> None:
    """Print ``table`` whole. A value wider than its column folds onto the next line instead of
    ending in "…"; when the output is not a terminal (a file, a pipe, a CI log) the table is as wide
    as its content, so every row stays one line that grep and diff can read."""
    console = console or Console()
    for column in table.columns:
        column.overflow = "fold"
    if console.is_terminal:  # the terminal's width is real: fold within it
        console.print(table)
        return
    if table.title is not None:  # a long title (an output folder) sets the width too, not wrapped over lines
        title = console.render_str(table.title) if isinstance(table.title, str) else table.title
        table.min_width = max(table.min_width or 0, title.cell_len)
    natural = Measurement.get(console, console.options.update_width(_UNBOUNDED), table).maximum
    before = console.width  # a file's width never changes by itself: put back as it was
    console.width = max(before, natural)
    try:
        console.print(table)
    finally:
        console.width = before
