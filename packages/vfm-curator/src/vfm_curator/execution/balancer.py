"""The auto-balancer: measure each stage's time per item and size its worker count so that no
stage starves the others (every stage's throughput ``workers / seconds_per_item`` as equal as the
resource budget allows).

Rule (:func:`allocate`): workers in proportion to each stage's seconds per item, scaled so the
stages together use the cluster's CPUs (and GPUs) when the stream runs at the rate they allow.
A unit the balancer sizes is a stage or a group of fused stages (:mod:`vfm_curator.execution.fusion`).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger("vfm_curator.balancer")


@dataclass
class StageCost:
    """What one worker of a unit (a stage, or fused ``stages`` named ``a+b+...``) asks for."""

    name: str
    cpus: float
    gpus: float = 0.0
    stages: tuple[str, ...] = ()  # the stages fused into this unit; () = the stage ``name`` alone

    @property
    def members(self) -> tuple[str, ...]:
        return self.stages or (self.name,)


def allocate(
    seconds_per_item: dict[str, float], costs: list[StageCost], cpu_budget: float, gpu_budget: float = 0.0,
    max_workers: int = 64,
) -> dict[str, int]:
    """Worker counts per stage for the highest throughput the budgets allow.

    In a steady stream at ``T`` items/s, stage ``i`` is busy ``T * s_i`` worker-seconds per second
    (``s_i`` seconds per item) and so uses ``T * s_i * cpus_i`` CPUs. The budget therefore allows
    ``T = cpu_budget / sum_i(s_i * cpus_i)`` (and likewise for GPUs), and stage ``i`` needs
    ``ceil(T * s_i)`` workers to keep up: workers in proportion to each stage's time per item, so
    every stage runs at the same rate and none starves the next (the seeds' figure 3).
    """
    cpu_demand = sum(seconds_per_item.get(c.name, 0.0) * c.cpus for c in costs)
    gpu_demand = sum(seconds_per_item.get(c.name, 0.0) * c.gpus for c in costs)
    limits = [float("inf")]
    if cpu_demand > 0:
        limits.append(cpu_budget / cpu_demand)
    if gpu_demand > 0:
        limits.append(gpu_budget / gpu_demand if gpu_budget > 0 else 0.0)
    rate = min(limits)
    if not math.isfinite(rate):
        return {c.name: 1 for c in costs}
    return {
        c.name: int(min(max_workers, max(1, math.ceil(rate * seconds_per_item.get(c.name, 0.0) - 1e-9))))
        for c in costs
    }


@dataclass
class AutoBalancer:
    """Keeps a moving average of seconds per item per unit and re-allocates workers every
    ``interval_s``; the first allocation from measurements and each change after it is logged and
    handed to ``on_decision``.

    Before the first measurement every unit is taken as equally slow, so a run starts with the
    workers its declared resources allow (one fused CPU group on 2 CPUs: 2 workers, not 1). A
    decision's ``seconds_per_item`` and ``workers`` are per stage (a fused stage: its own measured
    time, its group's workers); with fused units it also lists ``groups`` (each unit's stages,
    seconds per item and workers), and ``bottleneck`` names a unit."""

    costs: list[StageCost]
    cpu_budget: float
    gpu_budget: float = 0.0
    interval_s: float = 2.0
    smoothing: float = 0.3  # weight of the newest measurement
    on_decision: Callable[[dict[str, Any]], None] | None = None
    seconds_per_item: dict[str, float] = field(default_factory=dict)  # per unit
    stage_seconds: dict[str, float] = field(default_factory=dict)  # per stage of a fused unit
    workers: dict[str, int] = field(default_factory=dict)  # per unit
    decisions: list[dict[str, Any]] = field(default_factory=list)
    _last: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self.workers = allocate({c.name: 1.0 for c in self.costs}, self.costs, self.cpu_budget, self.gpu_budget)
        self._last = time.monotonic()

    def observe(self, unit: str, seconds: float, items: int, stages: dict[str, float] | None = None) -> None:
        """``seconds`` for ``items`` items through ``unit``; ``stages``: the seconds each fused stage took."""
        self._average(self.seconds_per_item, unit, seconds / max(items, 1))
        for stage, spent in (stages or {}).items():
            self._average(self.stage_seconds, stage, spent / max(items, 1))

    def _average(self, into: dict[str, float], key: str, value: float) -> None:
        old = into.get(key)
        into[key] = value if old is None else (1 - self.smoothing) * old + self.smoothing * value

    def maybe_rebalance(self, force: bool = False) -> dict[str, int]:
        now = time.monotonic()
        if not force and now - self._last < self.interval_s:
            return self.workers
        self._last = now
        if not self.seconds_per_item:
            return self.workers
        # a stage not measured yet is assumed as slow as the slowest measured one
        slowest = max(self.seconds_per_item.values())
        spi = {c.name: self.seconds_per_item.get(c.name, slowest) for c in self.costs}
        new = allocate(spi, self.costs, self.cpu_budget, self.gpu_budget)
        if new != self.workers or not self.decisions:  # the first measured allocation is logged even if unchanged
            throughput = {n: new[n] / max(spi[n], 1e-9) for n in new}  # items/s each unit can do
            decision = {
                "time": time.time(),
                "seconds_per_item": {n: round(v, 4) for n, v in spi.items()},
                "workers": new,
                "bottleneck": min(throughput, key=throughput.get),
                "items_per_s": round(min(throughput.values()), 3),
            }
            if any(len(c.members) > 1 for c in self.costs):  # per stage, and the fused units
                decision["seconds_per_item"] = {  # a fused stage not measured yet is left out
                    s: round(spi[c.name] if len(c.members) == 1 else self.stage_seconds[s], 4)
                    for c in self.costs for s in c.members if len(c.members) == 1 or s in self.stage_seconds}
                decision["workers"] = {s: new[c.name] for c in self.costs for s in c.members}
                decision["groups"] = {c.name: {"stages": list(c.members), "seconds_per_item": round(spi[c.name], 4),
                                               "workers": new[c.name]} for c in self.costs}
            self.decisions.append(decision)
            log.info("auto-balancer: workers %s (bottleneck %s)", new, decision["bottleneck"])
            if self.on_decision is not None:
                self.on_decision(decision)
            self.workers = new
        return self.workers
