"""What ``vfm curate`` and ``vfm shard`` share: per-stage progress bars, the run options that
override a pipeline config, and the table of figures printed at the end. Imported inside the
commands (it imports rich), never at CLI start-up."""

from __future__ import annotations

import time
from typing import Any, Iterable

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from vfm_plugins.text import printable, rich_text

RUNNERS = ("ray", "serial")


class StageProgress:
    """One rich progress bar per stage (the pipelines' ``progress`` protocol) on a terminal.

    Where the output is not a terminal (a batch job's log file, ``| tee``), rich draws the bars only
    when the run ends, so a run of hours would show nothing until then: there it prints one plain
    line instead each time another tenth of the items has passed the last stage, and at least every
    ``every_s`` seconds while the counts move, e.g. ``0:12:05 decode..embed 412/1000, caption..write
    410/1000 (41%)`` (neighbouring stages with the same count are named once: fused stages move
    together)."""

    def __init__(self, every_s: float = 60.0) -> None:
        self.progress = Progress(
            TextColumn("{task.description:>10}", markup=False),  # a plugin stage's name is text
            BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        )
        self.bars: dict[str, int] = {}
        self.every_s = every_s
        self.lines = False  # plain lines instead of bars: decided at start, on the console then in use
        self.counts: dict[str, int] = {}
        self.total = 0
        self._t0 = self._last_line_at = 0.0
        self._tenths = 0  # tenths of the items the last printed line had through the last stage
        self._printed: dict[str, int] = {}

    def start(self, stages: list[str], total: int) -> None:
        self.lines = not self.progress.console.is_terminal
        if self.lines:
            self.counts = {printable(s): 0 for s in stages}
            self.total = total
            self._t0 = self._last_line_at = time.monotonic()
            self._tenths, self._printed = 0, dict(self.counts)
            return
        self.bars = {s: self.progress.add_task(printable(s), total=total) for s in stages}
        self.progress.start()

    def advance(self, stage: str, n: int) -> None:
        if not self.lines:
            self.progress.advance(self.bars[stage], n)
            return
        name = printable(stage)
        self.counts[name] = self.counts.get(name, 0) + n
        now = time.monotonic()
        if self._tenths_done() > self._tenths or now - self._last_line_at >= self.every_s:
            self._print_line(now)

    def stop(self) -> None:
        if not self.lines:
            self.progress.stop()
        elif self.counts != self._printed:  # the end, unless the last line already showed it
            self._print_line(time.monotonic())

    def _tenths_done(self) -> int:
        last = list(self.counts.values())[-1] if self.counts else 0
        return 10 * last // self.total if self.total else 0

    def _print_line(self, now: float) -> None:
        runs: list[tuple[str, str, int]] = []  # (first stage, last stage, count) of equal neighbours
        for name, count in self.counts.items():
            if runs and runs[-1][2] == count:
                runs[-1] = (runs[-1][0], name, count)
            else:
                runs.append((name, name, count))
        parts = ", ".join(f"{a if a == b else f'{a}..{b}'} {count}/{self.total}" for a, b, count in runs)
        share = f" ({100 * runs[-1][2] // self.total}%)" if runs and self.total else ""
        self.progress.console.print(f"{clock(now - self._t0)} {parts}{share}", markup=False, highlight=False, soft_wrap=True)
        self._last_line_at, self._tenths, self._printed = now, self._tenths_done(), dict(self.counts)


def clock(seconds: float) -> str:
    """``H:MM:SS``, as rich's time columns write it (the plain lines read like the bars they replace)."""
    minutes, secs = divmod(int(max(seconds, 0)), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


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
