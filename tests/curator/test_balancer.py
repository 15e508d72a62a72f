"""The auto-balancer sizes workers by measured time per item, and the Ray runner follows it."""

from __future__ import annotations

import sys
import time


from vfm_curator.execution.balancer import AutoBalancer, StageCost, allocate
from vfm_curator.execution.spec import StageSpec
from vfm_curator.stages.base import Resources, Stage


def test_workers_are_proportional_to_seconds_per_item_within_the_budget():
    costs = [StageCost("decode", 1.0), StageCost("split", 0.5), StageCost("transcode", 1.0)]
    spi = {"decode": 0.1, "split": 0.01, "transcode": 0.3}
    workers = allocate(spi, costs, cpu_budget=8)
    # rate = 8 / (0.1 + 0.005 + 0.3) = 19.75 items/s -> ceil(rate * s_i)
    assert workers == {"decode": 2, "split": 1, "transcode": 6}
    # every stage can keep up with the slowest stage's rate
    rates = {n: workers[n] / spi[n] for n in workers}
    assert min(rates.values()) >= 19.7


def test_gpu_stages_are_limited_by_the_gpu_budget():
    costs = [StageCost("decode", 1.0), StageCost("caption", 1.0, gpus=1.0)]
    workers = allocate({"decode": 0.1, "caption": 1.0}, costs, cpu_budget=64, gpu_budget=2)
    assert workers == {"decode": 1, "caption": 2}  # 2 GPUs -> 2 items/s; decode needs 0.2 workers
    assert allocate({"decode": 0.1, "caption": 1.0}, costs, cpu_budget=64, gpu_budget=0)["caption"] == 1


def test_balancer_logs_each_change_of_allocation():
    seen = []
    balancer = AutoBalancer([StageCost("a", 1.0), StageCost("b", 1.0)], cpu_budget=4, interval_s=0.0, on_decision=seen.append)
    balancer.observe("a", 0.1, 1)
    balancer.observe("b", 0.3, 1)
    assert balancer.maybe_rebalance() == {"a": 1, "b": 3}
    assert seen and seen[-1]["bottleneck"] in ("a", "b") and seen[-1]["workers"] == {"a": 1, "b": 3}
    balancer.maybe_rebalance()
    assert len(seen) == 1  # no change, no new decision


class FastStage(Stage):
    name = "fast"
    resources = Resources(cpus=0.25, memory_mb=64)

    def process_one(self, task):
        time.sleep(0.01)
        task["path"].append("fast")


class SlowStage(Stage):
    name = "slow"
    resources = Resources(cpus=0.25, memory_mb=64)

    def process_one(self, task):
        start = time.time()
        time.sleep(0.25)
        task["path"].append("slow")
        task["span"] = (start, time.time())


class Item(dict):
    failure = None  # the stage interface reads task.failure


def test_ray_runner_gives_the_slow_stage_more_workers_and_loses_no_item(ray_session):
    from ray import cloudpickle

    from vfm_curator.execution.ray_runner import RayRunner

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/
    decisions = []
    runner = RayRunner(  # unfused: one call per stage, so each stage gets its own worker count
        [StageSpec(FastStage), StageSpec(SlowStage)], queue_size=4, balance_interval_s=0.2, cpu_budget=1.0,
        on_decision=decisions.append, fuse=False,
    )
    items = [Item(id=i, path=[]) for i in range(24)]
    out = list(runner.run(items))
    assert sorted(o["id"] for o in out) == list(range(24))
    assert all(o["path"] == ["fast", "slow"] for o in out)
    assert decisions, "the balancer never changed the allocation"
    assert runner.allocation["slow"] > runner.allocation["fast"] == 1
    assert runner.peak_workers["slow"] >= 2
    spans = sorted(o["span"] for o in out)
    overlaps = sum(b[0] < a[1] for a, b in zip(spans, spans[1:]))
    assert overlaps >= 4, "slow calls never ran at the same time"
