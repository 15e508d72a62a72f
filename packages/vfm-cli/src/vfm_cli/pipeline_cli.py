"""What ``vfm curate`` and ``vfm shard`` share: per-stage progress bars, the run options that
override a pipeline config, and the table of figures printed at the end. Imported inside the
commands (it imports rich), never at CLI start-up."""

from __future__ import annotations

from typing import Any, Iterable

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from vfm_plugins.text import printable, rich_text

RUNNERS = ("ray", "serial")


class StageProgress:
    """One rich progress bar per stage (the pipelines' ``progress`` protocol)."""

    def __init__(self) -> None:
        self.progress = Progress(
            TextColumn("{task.description:>10}", markup=False),  # a plugin stage's name is text
            BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        )
        self.bars: dict[str, int] = {}

    def start(self, stages: list[str], total: int) -> None:
        self.bars = {s: self.progress.add_task(printable(s), total=total) for s in stages}
        self.progress.start()

    def advance(self, stage: str, n: int) -> None:
        self.progress.advance(self.bars[stage], n)

    def stop(self) -> None:
        self.progress.stop()


def apply_run_options(execution: Any, runner: str | None, ray_address: str | None, num_cpus: float | None) -> None:
    """``--runner``, ``--ray-address`` and ``--num-cpus`` override the config's ``[run]`` values."""
    if runner:
        if runner not in RUNNERS:
            raise typer.BadParameter(f"unknown runner {runner!r}; accepted: {', '.join(RUNNERS)}", param_hint="--runner")
        execution.runner = runner
    if ray_address:
        execution.ray_address = ray_address
    if num_cpus is not None:  # 0 too: refused by the [run] check, not silently ignored
        execution.num_cpus = num_cpus


def figures_table(rows: Iterable[tuple[str, Any]], title: str | None = None) -> Table:
    """A two-column table of a run's figures; ``workers`` dicts print as ``stage=n, ...``."""
    table = Table(title=rich_text(title) if title is not None else None)  # an out folder's "[x]" is text
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in rows:
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        table.add_row(name, rich_text(value))
    return table
