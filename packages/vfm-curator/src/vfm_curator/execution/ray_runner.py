"""The streaming Ray runner: adjacent stages that need the same device are fused into one call
(:mod:`vfm_curator.execution.fusion`), every call is a Ray task, outputs flow as object refs (never
through the driver), each queue between groups is bounded, and the auto-balancer decides how many
calls of each group may run at once.

Ray reuses worker processes, and each worker caches its built stages (:func:`cached_stage`), so a
model-loading stage loads its model once per worker.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from vfm_curator.errors import StopRun
from vfm_curator.execution.balancer import AutoBalancer, StageCost
from vfm_curator.execution.fusion import StageGroup
from vfm_curator.execution.fusion import fuse as _fuse
from vfm_curator.failures import classify_worker_error
from vfm_curator.execution.spec import StageSpec, cached_stage
from vfm_curator.stages.base import process_batch
from vfm_plugins import PluginResultError


def _run_group(group: StageGroup, *batches: list) -> tuple[list, dict]:
    """Worker side: build (once) the group's stages and run them one after another on the
    concatenated input batches; the seconds of each stage come back with the total."""
    import os

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    tasks = [t for batch in batches for t in batch]
    items = len(tasks)
    stages = []
    for spec in group.specs:  # built once per worker; not part of the per-item time
        try:
            stages.append(cached_stage(spec))
        except Exception as exc:  # names the stage in the failure, not the whole group
            exc.failed_stage = spec.name
            raise
    seconds: dict[str, float] = {}
    for spec, stage in zip(group.specs, stages):
        t0 = time.perf_counter()
        tasks = process_batch(stage, tasks)
        seconds[spec.name] = time.perf_counter() - t0
    return tasks, {"seconds": sum(seconds.values()), "items": items, "stages": seconds}


@dataclass
class _Call:
    stage: int  # index of the group
    inputs: list  # object refs of the input batches (kept to recover the tasks if the call dies)
    out: Any
    items: int
    started: float = 0.0  # time.monotonic() at launch, for the stage timeout


class RayRunner:
    """``RayRunner(specs).run(tasks)`` yields what the last stage returns, in completion order.

    ``fuse``: run adjacent stages with the same GPU need in one call (:func:`fuse`; a stage in
    ``fixed_workers`` runs alone); ``fuse=False``: one call per stage. ``queue_size``: most items
    waiting in front of a group per worker of that group (backpressure: an upstream group stops
    launching when its downstream queue is full). ``on_progress(stage, n)`` is called when ``n``
    items leave ``stage`` (every stage of a fused call at once); ``on_decision(dict)`` on every
    balancer decision. ``failure(task, stage, reason, cause, kind)`` marks a task whose whole call
    died (a crashed or out-of-memory worker, a call cancelled after ``stage_timeout_s``, which
    bounds one call: all the stages of a fused one; see :mod:`vfm_curator.failures`); ``stage`` is
    then the call's group (``decode+split+...``: which of its stages was running died with the
    worker), or the stage that could not be set up. A :class:`~vfm_curator.errors.StopRun` raised
    in a worker (disk full) stops the run here too, as does a :class:`~vfm_plugins.PluginResultError`
    (a stage whose ``process`` returns no list of tasks).
    """

    def __init__(
        self,
        specs: list[StageSpec],
        *,
        queue_size: int = 2,
        balance_interval_s: float = 2.0,
        cpu_budget: float | None = None,
        gpu_budget: float | None = None,
        fixed_workers: dict[str, int] | None = None,
        on_progress: Callable[[str, int], None] | None = None,
        on_decision: Callable[[dict], None] | None = None,
        failure: Callable[[Any, str, str, str, str], None] | None = None,
        stage_timeout_s: float | None = None,
        fuse: bool = True,
    ) -> None:
        import ray

        from vfm_curator.execution.session import cluster_budget

        self.specs = specs
        self.fixed = dict(fixed_workers or {})
        self.groups = _fuse(specs, pinned=set(self.fixed), enabled=fuse)
        self.queue_size = max(1, queue_size)
        cpus, gpus = cluster_budget()
        costs = [StageCost(g.name, g.declared().cpus, g.declared().gpus, g.stages) for g in self.groups]
        self.balancer = AutoBalancer(
            costs, cpu_budget if cpu_budget is not None else cpus, gpu_budget if gpu_budget is not None else gpus,
            interval_s=balance_interval_s, on_decision=on_decision,
        )
        self.on_progress = on_progress
        self.failure = failure
        self.stage_timeout_s = stage_timeout_s
        self._remote = [
            ray.remote(_run_group).options(num_returns=2, max_retries=1, **g.declared().ray_options()) for g in self.groups
        ]
        self.peak_workers: dict[str, int] = {s.name: 0 for s in specs}  # per stage: its group's peak

    @property
    def allocation(self) -> dict[str, int]:
        """Workers per stage (a fused stage: its group's)."""
        return {name: self._workers(i) for i, g in enumerate(self.groups) for name in g.stages}

    @property
    def decisions(self) -> list[dict]:
        return self.balancer.decisions

    def _workers(self, i: int) -> int:
        name = self.groups[i].name  # a pinned stage is a group of its own, named as the stage
        return self.fixed.get(name, self.balancer.workers[name])

    def run(self, tasks: Iterable[Any], *, hold: Callable[[], bool] | None = None) -> Iterator[Any]:
        """``hold()``: True while the caller wants no new input taken (it holds finished tasks back
        to hand them on in input order, :class:`~vfm_curator.execution.ordering.InputOrder`); input
        is still taken when nothing is running or queued, so a hold can never stall the run, and only
        then: ``InputOrder.feed`` reads a pull while held as every task taken before having come out."""
        import ray

        n = len(self.groups)
        source = iter(tasks)
        exhausted = False
        queues: list[deque] = [deque() for _ in range(n)]  # (ref, items)
        queued = [0] * n  # items waiting per queue
        running: dict[Any, _Call] = {}  # stats ref -> call
        calls = [0] * n
        running_items = [0] * n

        def room(i: int) -> int:
            return self.queue_size * self._workers(i) * self.groups[i].batch_size

        def taking() -> bool:
            return hold is None or not hold() or not (running or any(queues))

        while True:
            while not exhausted and queued[0] + running_items[0] < room(0) and taking():
                try:
                    queues[0].append((ray.put([next(source)]), 1))
                    queued[0] += 1
                except StopIteration:
                    exhausted = True
            for i in reversed(range(n)):  # downstream first, so finished work drains before new work enters
                while queues[i] and calls[i] < self._workers(i):
                    if i + 1 < n and queued[i + 1] + running_items[i] >= room(i + 1):
                        break  # bounded queue: downstream is full
                    refs, items = [], 0
                    while queues[i] and items < self.groups[i].batch_size:
                        ref, k = queues[i].popleft()
                        refs.append(ref)
                        items += k
                    queued[i] -= items
                    out, stats = self._remote[i].remote(self.groups[i], *refs)
                    running[stats] = _Call(i, refs, out, items, time.monotonic())
                    calls[i] += 1
                    running_items[i] += items
                    for name in self.groups[i].stages:
                        self.peak_workers[name] = max(self.peak_workers[name], calls[i])
            if not running:
                if exhausted and not any(queues):
                    break
                continue
            wait_s = 1.0
            if self.stage_timeout_s:  # wake up at the earliest deadline, so a late call is caught on time
                earliest = min(c.started for c in running.values()) + self.stage_timeout_s
                wait_s = max(0.0, min(wait_s, earliest - time.monotonic()))
            done, _ = ray.wait(list(running), num_returns=1, timeout=wait_s)
            now = time.monotonic()
            late = [r for r, c in running.items() if r not in done and self.stage_timeout_s and now - c.started > self.stage_timeout_s]
            for ref in [*done, *late]:
                call = running.pop(ref)
                i, name = call.stage, self.groups[call.stage].name
                calls[i] -= 1
                running_items[i] -= call.items
                out = call.out
                if ref in late:  # a stage call that runs too long: cancel it, fail its tasks (cause: machine)
                    ray.cancel(call.out, force=True)
                    out = ray.put(self._fail_inputs(call, name, TimeoutError(
                        f"no result after {self.stage_timeout_s:g} s (run.stage_timeout_s); cancelled")))
                else:
                    try:
                        stats = ray.get(ref)
                        self.balancer.observe(name, stats["seconds"], stats["items"], stats["stages"])
                    except Exception as exc:  # the call itself died: fail its tasks, keep going
                        stop = getattr(exc, "cause", None)
                        # disk full, or a stage breaking its contract (process returning no list): no other task
                        # would escape it, and the serial runner stops on both the same way
                        if isinstance(stop, (StopRun, PluginResultError)):
                            raise stop from None
                        out = ray.put(self._fail_inputs(call, name, exc))
                if self.on_progress:
                    for stage in self.groups[i].stages:
                        self.on_progress(stage, call.items)
                if i + 1 < n:
                    queues[i + 1].append((out, call.items))
                    queued[i + 1] += call.items
                else:
                    yield from ray.get(out)
            self.balancer.maybe_rebalance()

    def _fail_inputs(self, call: _Call, stage: str, exc: Exception) -> list:
        import ray

        tasks = [t for batch in ray.get(call.inputs) for t in batch]
        cause, kind = ("machine", "timeout") if isinstance(exc, TimeoutError) else classify_worker_error(exc)
        inner = getattr(exc, "cause", None)
        shown = inner if isinstance(inner, BaseException) else exc
        stage = getattr(shown, "failed_stage", None) or stage  # a stage that could not be built
        first = str(shown).strip().splitlines()[0] if str(shown).strip() else ""
        reason = f"{stage} worker failed: {type(shown).__name__}: {first}"
        for task in tasks:
            if self.failure is not None:
                self.failure(task, stage, reason, cause, kind)
        return tasks
