"""The stage interface every pipeline (clipping, sharding) and every stage plugin shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from vfm_curator.errors import InputError, LimitError, StopRun
from vfm_plugins import PluginError, PluginResultError

__all__ = ["InputError", "LimitError", "Resources", "Stage", "StageDefinitionError", "StageSetupError", "process_batch",
           "run_guarded"]


class StageSetupError(ValueError):
    """A stage could not be built (a model or option its setup needs): the config's fault."""


class StageDefinitionError(PluginError, TypeError):
    """A stage class that cannot run (it defines neither ``process_one`` nor ``process``): the stage
    author's fault, not the config's, so it is no ``ValueError`` (``vfm`` prints it as one line)."""


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
    into ``task.fail(stage, reason, cause, kind)`` (see :mod:`vfm_curator.failures`) and later stages
    pass failed tasks through untouched. :class:`LimitError` marks a failure a configured limit
    decided; :class:`StopRun` (disk full) stops the whole run.
    """

    name: ClassVar[str] = "stage"
    resources: ClassVar[Resources] = Resources()
    batch_size: ClassVar[int] = 1

    #: Option names and their defaults; ``Stage(**options)`` accepts exactly these.
    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, **options: Any) -> None:
        self.check_defined()
        unknown = set(options) - set(self.defaults)
        if unknown:
            raise ValueError(
                f"stage {self.name!r}: unknown option(s) {', '.join(sorted(unknown))}; "
                f"accepted: {', '.join(sorted(self.defaults)) or '(none)'}"
            )
        self.opt: dict[str, Any] = {**self.defaults, **options}
        self.check_options()
        self._ready = False

    @classmethod
    def check_defined(cls) -> None:
        """Raise :class:`StageDefinitionError` if ``cls`` overrides neither :meth:`process_one` nor
        :meth:`process`. Runs when the driver builds the stage, before any work: else every video
        would fail with a bare ``NotImplementedError`` from the worker and the run write nothing."""
        if cls.process is not Stage.process or cls.process_one is not Stage.process_one:
            cls._check_signature()
            return
        # a near miss (process_clip, process_task, processOne) is most likely the method meant
        near = sorted(attr for klass in cls.__mro__ if klass is not Stage and klass is not object
                      for attr, value in vars(klass).items() if callable(value) and attr.lower().startswith("process"))
        hint = f" ({cls.__name__} has {', '.join(near)}: rename it?)" if near else ""
        raise StageDefinitionError(
            f"{_named(cls)} defines neither process_one nor process: "
            f"define process_one(self, task) to work on one task in place, or process(self, tasks) returning the "
            f"tasks for real batching{hint}")

    @classmethod
    def _check_signature(cls) -> None:
        """The overridden ``process_one(self, task)`` / ``process(self, tasks)`` takes its one argument:
        ``def process_one(self)`` failed every video with Python's ``takes 1 positional argument but 2
        were given``, recorded as the video's fault."""
        from vfm_plugins import refused_signature

        for method, argument in (("process_one", "task"), ("process", "tasks")):
            function = getattr(cls, method)
            if function is getattr(Stage, method):
                continue
            signature = refused_signature(function, 2)  # self, the task(s)
            if signature is not None:
                raise StageDefinitionError(
                    f"{_named(cls)}: its {method}{signature} cannot "
                    f"take the {argument}; define {method}(self, {argument})")

    def check_options(self) -> None:
        """Raise ``ValueError`` naming an option outside its accepted range (runs when the stage is
        built, in the driver before any work: the same check for the API, the CLI and ``--config``)."""

    def option_range(self, key: str, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
                     integer: bool = False) -> None:
        """Check ``self.opt[key]`` is a number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
        value = self.opt[key]
        kind = "an integer" if integer else "a number"
        ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok_type or value != value:
            raise ValueError(f"stage {self.name!r}: option {key} must be {kind}, got {value!r}")
        below = lo is not None and (value <= lo if lo_open else value < lo)
        if below or (hi is not None and value > hi):
            left = "(" if lo_open else "["
            raise ValueError(f"stage {self.name!r}: option {key} = {value!r} is out of range; accepted: "
                             f"{kind} in {left}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]")

    def gpu_share_resources(self, **changes: Any) -> Resources:
        """The class's resources asking Ray for the ``gpu_share`` option's part of a GPU (what a stage
        declares once it knows its work runs on CUDA), with ``changes`` (e.g. ``memory_mb``)."""
        from dataclasses import replace

        return replace(type(self).resources, gpus=float(self.opt["gpu_share"]), **changes)

    def ensure_setup(self) -> None:
        if not self._ready:
            try:
                self.setup()
            except Exception as exc:
                raise StageSetupError(f"stage {self.name!r} could not be set up: {type(exc).__name__}: {exc}") from exc
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


def _named(stage: Stage | type[Stage]) -> str:
    """``stage 'name' (class module.Class)``: how an error names a stage (or its class), so its author finds it."""
    cls = stage if isinstance(stage, type) else type(stage)
    return f"stage {stage.name!r} (class {cls.__module__}.{cls.__qualname__})"


def process_batch(stage: Stage, tasks: list[Any]) -> list[Any]:
    """``stage.process(tasks)``, refusing what is not a list of tasks, or a task whose ``clips`` is no longer
    a list, with a :class:`~vfm_plugins.PluginResultError` naming the stage (a plugin's ``process`` that
    forgets ``return tasks`` stopped ``vfm curate`` with ``object of type 'NoneType' has no len()``; a
    ``task.clips = filter(...)`` failed in a later stage as ``'filter' object is not subscriptable``).

    An error a plugin stage's ``process`` raises fails the batch's tasks as :func:`run_guarded` fails one (that
    plugin's bug), here in the worker, so both runners record the same: it stopped a serial run, and a Ray call
    that raised it was a dead worker's, each video blamed (cause input) under the fused group's name. A built-in
    stage's goes to the runner: its own batch ``process`` guards each task, so what escapes it is no video's (an
    output folder the write stage cannot commit in), and recorded as each video's input error it was never redone."""
    try:
        result = stage.process(tasks)
    except (StopRun, StageSetupError):  # the run's or the config's, not these tasks': the runner decides
        raise
    except (Exception, MemoryError) as exc:
        if _plugin_stage(stage.name) is None:
            raise
        for task in tasks:
            if getattr(task, "failure", None) is None:
                _fail(stage.name, task, exc)
        return tasks
    if not isinstance(result, list):
        raise PluginResultError(
            f"{_named(stage)}: process returned "
            f"{'None' if result is None else 'a ' + type(result).__name__}; it must return the list of tasks (those "
            f"it was given, changed in place: `return tasks`)")
    for task in result:
        clips = getattr(task, "clips", [])
        if not isinstance(clips, list):  # the next stage failed on it, naming neither this stage nor the cause
            raise PluginResultError(
                f"{_named(stage)} left task.clips as a "
                f"{type(clips).__name__}; it must stay a list of clips (`task.clips = [c for c in task.clips if ...]`)")
    return result


def _plugin_stage(name: str) -> str | None:
    """``stage 'name' from dist version`` where a plugin, not vfm-curator, registered the stage ``name``."""
    from vfm_curator.plugins import host

    entry = host.entries("stages").get(name)
    if entry is None or entry.provider == host.distribution:
        return None
    return f"stage {name!r} from {entry.provider} {entry.version}"


def run_guarded(stage: str, task: Any, fn) -> None:
    """Call ``fn(task)``; an exception marks that task failed with a reason (and its cause) instead
    of stopping the run. :class:`StopRun` (disk full) is the exception: no other task would escape it.
    A plugin stage's own error (not an :class:`InputError`) is recorded as that plugin's bug, named in the
    reason (:func:`vfm_curator.failures.classify`), not as the video's."""
    import time

    t0 = time.perf_counter()
    try:
        fn(task)
    except StopRun:
        raise
    except (Exception, MemoryError) as exc:  # bad input must never stop the run
        _fail(stage, task, exc)
    finally:
        timings = getattr(task, "timings", None)
        if timings is not None:
            timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - t0


def _fail(stage: str, task: Any, exc: BaseException) -> None:
    """Mark ``task`` failed by ``exc`` raised in ``stage``, with its cause and kind
    (:func:`vfm_curator.failures.classify`); a plugin stage's own error names the plugin in the reason."""
    from vfm_curator.failures import classify

    reason = str(exc) or type(exc).__name__
    plugin = None if isinstance(exc, InputError) else _plugin_stage(stage)
    cause, kind = classify(exc, by_plugin=plugin is not None)
    if not isinstance(exc, InputError):
        reason = f"{type(exc).__name__}: {reason}"
    if kind == "plugin-error":
        reason += (f" (a bug of {plugin}, not of this video; once the plugin is mended, run again with "
                   "--retry-failed plugin-error)")
    task.fail(stage, reason, cause, kind)
