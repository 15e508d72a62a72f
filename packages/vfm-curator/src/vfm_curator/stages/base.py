"""The stage interface every pipeline (clipping, sharding) and every stage plugin shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from vfm_curator.errors import InputError


@dataclass(frozen=True)
class Resources:
    """What one worker of a stage asks the scheduler for."""

    cpus: float = 1.0
    gpus: float = 0.0
    memory_mb: int = 512

    def ray_options(self) -> dict[str, Any]:
        return {"num_cpus": self.cpus, "num_gpus": self.gpus, "memory": self.memory_mb * 1024 * 1024}


class Stage:
    """A pipeline step: ``process(tasks) -> tasks`` over a batch of up to ``batch_size`` tasks.

    Subclasses set ``name``, ``resources``, ``batch_size`` and ``defaults`` and implement :meth:`process_one`
    (or :meth:`process` for real batching). ``setup`` runs once per worker process before the first
    call (load models there). A stage never raises for one bad task: the runner turns an exception
    into ``task.fail(stage, reason)`` and later stages pass failed tasks through untouched.
    """

    name: ClassVar[str] = "stage"
    resources: ClassVar[Resources] = Resources()
    batch_size: ClassVar[int] = 1

    #: Option names and their defaults; ``Stage(**options)`` accepts exactly these.
    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, **options: Any) -> None:
        unknown = set(options) - set(self.defaults)
        if unknown:
            raise ValueError(
                f"stage {self.name!r}: unknown option(s) {', '.join(sorted(unknown))}; "
                f"accepted: {', '.join(sorted(self.defaults)) or '(none)'}"
            )
        self.opt: dict[str, Any] = {**self.defaults, **options}
        self._ready = False

    def ensure_setup(self) -> None:
        if not self._ready:
            self.setup()
            self._ready = True

    def setup(self) -> None:
        """Load what every call needs (models); runs once per worker."""

    def process(self, tasks: list[Any]) -> list[Any]:
        self.ensure_setup()
        for task in tasks:
            if getattr(task, "failure", None) is None:
                run_guarded(self.name, task, self.process_one)
        return tasks

    def process_one(self, task: Any) -> None:
        raise NotImplementedError


def run_guarded(stage: str, task: Any, fn) -> None:
    """Call ``fn(task)``; an exception marks that task failed with a reason instead of stopping the run."""
    import time

    t0 = time.perf_counter()
    try:
        fn(task)
    except Exception as exc:  # bad input must never stop the run
        reason = str(exc) or type(exc).__name__
        task.fail(stage, f"{type(exc).__name__}: {reason}" if not isinstance(exc, InputError) else reason)
    finally:
        timings = getattr(task, "timings", None)
        if timings is not None:
            timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - t0
