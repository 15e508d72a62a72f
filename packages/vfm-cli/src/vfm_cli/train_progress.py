"""``vfm train``'s progress display on rank 0: a rich bar on a terminal, plain lines in a log file.

Both are metrics sinks (``log(step, metrics)``, ``close()``) fed by the trainer at each logged step.
Imported by the train command only (it imports rich).
"""

from __future__ import annotations

import time


def progress_sink(total: int):
    """The bar where the output is a terminal; elsewhere (a batch job's log, ``| tee``) rich would
    draw the bar only when the run ends, as one line cut at 80 columns, so a line per logged step."""
    from rich import get_console

    return TrainBar(total) if get_console().is_terminal else TrainLines(total)


class TrainBar:
    """A rich progress bar advanced by the trainer's metrics."""

    def __init__(self, total: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("train"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                 TextColumn("{task.fields[info]}"))
        self.task = self.progress.add_task("train", total=total, completed=0, info="")
        self.progress.start()

    def log(self, step: int, metrics: dict) -> None:
        from vfm_parallel.trainer.metrics import format_metrics

        info = format_metrics(step, self.progress.tasks[0].total, metrics).split("  ", 1)[-1]
        self.progress.update(self.task, completed=step, info=info)

    def close(self) -> None:
        self.progress.stop()


class TrainLines:
    """One whole line per logged step, written (and flushed) as the step is logged, e.g.
    ``0:01:05 step 500/2000 (25%)  loss 0.31511  grad_norm 0.619  lr 2.00e-04  tokens_per_s 16038.9
    MFU(6N+12LhS) 12.68%  ETA 0:03:15``: what the bar shows, never folded or cut at the console's width."""

    def __init__(self, total: int) -> None:
        from rich import get_console

        self.console = get_console()
        self.total = total
        self._t0 = time.monotonic()
        self._first: tuple[int, float] | None = None  # (step, time) of the first logged step: the rate's origin

    def log(self, step: int, metrics: dict) -> None:
        from vfm_cli.pipeline_cli import clock
        from vfm_parallel.trainer.metrics import format_metrics

        now = time.monotonic()
        if self._first is None:
            self._first = (step, now)
        share = f" ({100 * step // self.total}%)" if self.total else ""
        head, _, rest = format_metrics(step, self.total, metrics).partition("  ")
        eta = self._seconds_left(step, now, metrics.get("step_time_s"))
        tail = f"  ETA {clock(eta)}" if eta is not None else ""
        self.console.print(f"{clock(now - self._t0)} {head}{share}  {rest}{tail}".rstrip(), markup=False,
                           highlight=False, soft_wrap=True)

    def _seconds_left(self, step: int, now: float, step_time_s: float | None) -> float | None:
        """The steps left at the mean pace since the first logged step (checkpoint saves included);
        at the first, that window's own time per step (a resumed run starts past step 0)."""
        first_step, first_at = self._first
        if step > first_step:
            per_step = (now - first_at) / (step - first_step)
        elif step_time_s is not None:
            per_step = step_time_s
        else:
            return None
        return max(self.total - step, 0) * per_step

    def close(self) -> None:
        pass
