"""The auto-balancer: measure each stage's time per item and size its worker count so that no
stage starves the others (every stage's throughput ``workers / seconds_per_item`` as equal as the
resource budget allows).

Greedy rule: every stage starts with one worker; while the budget has room, one more worker goes to
the stage with the lowest throughput (the bottleneck). This maximises the pipeline's throughput,
which is the minimum over stages.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger("vfm_curator.balancer")


@dataclass
class StageCost:
    name: str
    cpus: float
    gpus: float = 0.0


def allocate(
    seconds_per_item: dict[str, float], costs: list[StageCost], cpu_budget: float, gpu_budget: float = 0.0,
    max_workers: int = 64,
) -> dict[str, int]:
    """Worker counts per stage (>= 1 each) maximising ``min(workers / seconds_per_item)`` within the
    CPU and GPU budgets (one worker of every stage is always granted)."""
    workers = {c.name: 1 for c in costs}
    used_cpu = sum(c.cpus for c in costs)
    used_gpu = sum(c.gpus for c in costs)
    by_name = {c.name: c for c in costs}
    while True:
        name = min(workers, key=lambda n: workers[n] / max(seconds_per_item.get(n, 0.0), 1e-9))
        c = by_name[name]
        if (
            workers[name] >= max_workers
            or used_cpu + c.cpus > cpu_budget + 1e-9
            or used_gpu + c.gpus > gpu_budget + 1e-9
        ):
            break  # the bottleneck cannot grow; growing another stage would not raise the minimum
        workers[name] += 1
        used_cpu += c.cpus
        used_gpu += c.gpus
    return workers


@dataclass
class AutoBalancer:
    """Keeps a moving average of seconds per item per stage and re-allocates workers every
    ``interval_s``; each change is logged and handed to ``on_decision``."""

    costs: list[StageCost]
    cpu_budget: float
    gpu_budget: float = 0.0
    interval_s: float = 2.0
    smoothing: float = 0.3  # weight of the newest measurement
    on_decision: Callable[[dict[str, Any]], None] | None = None
    seconds_per_item: dict[str, float] = field(default_factory=dict)
    workers: dict[str, int] = field(default_factory=dict)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    _last: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self.workers = {c.name: 1 for c in self.costs}
        self._last = time.monotonic()

    def observe(self, stage: str, seconds: float, items: int) -> None:
        per_item = seconds / max(items, 1)
        old = self.seconds_per_item.get(stage)
        self.seconds_per_item[stage] = per_item if old is None else (1 - self.smoothing) * old + self.smoothing * per_item

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
        if new != self.workers:
            throughput = {n: new[n] / max(spi[n], 1e-9) for n in new}
            decision = {
                "time": time.time(),
                "seconds_per_item": {n: round(v, 4) for n, v in spi.items()},
                "workers": new,
                "bottleneck": min(throughput, key=throughput.get),
                "items_per_s": round(min(throughput.values()), 3),
            }
            self.decisions.append(decision)
            log.info("auto-balancer: workers %s (bottleneck %s)", new, decision["bottleneck"])
            if self.on_decision is not None:
                self.on_decision(decision)
            self.workers = new
        return self.workers
