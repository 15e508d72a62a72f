"""How a command stops on bad input: one plain ``error: ...`` line on stderr and exit status 1.

Plain text on purpose: a reason may quote a file name or a config key in brackets (``[shard]``),
which a rich markup string would swallow as a style tag; control characters in it (a file name's ESC) are
printed escaped (:func:`vfm_plugins.printable`).
"""

from __future__ import annotations

from typing import NoReturn

import typer

from vfm_plugins.text import printable


def fail(message: object) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit 1 (inside ``except``, the cause stays chained)."""
    typer.echo(f"error: {printable(message)}", err=True)  # a reason may quote a file name: no terminal controls
    raise typer.Exit(1)
