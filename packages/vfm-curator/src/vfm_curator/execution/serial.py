"""The in-process runner: every stage on every task, one after another (debugging, baselines)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from vfm_curator.execution.spec import StageSpec
from vfm_curator.stages.base import process_batch


class SerialRunner:
    """Same interface as :class:`RayRunner`, no parallelism and no Ray."""

    def __init__(self, specs: list[StageSpec], *, on_progress: Callable[[str, int], None] | None = None) -> None:
        self.specs = specs
        self.on_progress = on_progress
        self.allocation: dict[str, int] = {s.name: 1 for s in specs}
        self.decisions: list[dict[str, Any]] = []

    def run(self, tasks: Iterable[Any], *, hold: Callable[[], bool] | None = None) -> Iterator[Any]:
        """Tasks come out in input order, each before the next is taken: ``hold`` (see :meth:`RayRunner.run`)
        has nothing to hold."""
        stages = [spec.build() for spec in self.specs]
        for task in tasks:
            batch = [task]
            for spec, stage in zip(self.specs, stages):
                batch = process_batch(stage, batch)
                if self.on_progress:
                    self.on_progress(spec.name, len(batch))
            yield from batch
