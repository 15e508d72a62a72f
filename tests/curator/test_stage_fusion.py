"""Stage fusion: adjacent stages with the same GPU need run in one worker call, the balancer sizes
the groups (GPU slots counted), and a failure inside a fused call still fails only its tasks."""

from __future__ import annotations

import os
import sys

import pytest

from vfm_curator.execution.balancer import AutoBalancer, StageCost
from vfm_curator.execution.fusion import fuse
from vfm_curator.execution.spec import StageSpec
from tests.curator.stage_items import Item
from vfm_curator.stages.base import Resources, Stage


class Mark(Stage):
    """Appends (its name, the worker's pid) to the item's path."""

    name = "mark"
    resources = Resources(cpus=0.5, memory_mb=64)

    def process_one(self, task):
        task["path"].append((self.name, os.getpid()))


class First(Mark):
    name = "first"


class Second(Mark):
    name = "second"
    batch_size = 4
    resources = Resources(cpus=1.0, memory_mb=256)


class Third(Mark):
    name = "third"
    defaults = {"kill_id": -1}

    def process_one(self, task):
        if task["id"] == self.opt["kill_id"]:
            os._exit(1)  # the worker dies in the middle of a fused call
        super().process_one(task)


class OnGpu(Mark):
    name = "on_gpu"
    resources = Resources(cpus=1.0, gpus=1.0, memory_mb=128)


class Broken(Mark):
    name = "broken"

    def setup(self):
        raise FileNotFoundError("no model at /nowhere")


def test_adjacent_stages_with_the_same_gpu_need_fuse_and_pinned_stages_stay_alone():
    specs = [StageSpec(First), StageSpec(Second), StageSpec(OnGpu), StageSpec(Third), StageSpec(Mark)]
    groups = fuse(specs)
    assert [g.stages for g in groups] == [("first", "second"), ("on_gpu",), ("third", "mark")]
    cpu = groups[0].declared()  # the members run one at a time: the most any asks for, not the sum
    assert (cpu.cpus, cpu.gpus, cpu.memory_mb) == (1.0, 0.0, 256)
    assert groups[0].batch_size == 1 and groups[0].name == "first+second"
    assert groups[1].declared().gpus == 1.0
    assert [g.stages for g in fuse(specs, pinned={"mark"})] == [("first", "second"), ("on_gpu",), ("third",), ("mark",)]
    assert [g.stages for g in fuse(specs, enabled=False)] == [(s.name,) for s in specs]


def test_the_balancer_sizes_fused_groups_within_cpu_and_gpu_slots_and_logs_per_stage_times():
    seen = []
    costs = [StageCost("decode+split", 1.0, 0.0, ("decode", "split")), StageCost("embed", 1.0, 1.0)]
    balancer = AutoBalancer(costs, cpu_budget=8, gpu_budget=1, interval_s=0.0, on_decision=seen.append)
    # before any measurement: as many workers as the slots allow with both taken as equally slow
    assert balancer.workers == {"decode+split": 1, "embed": 1}
    balancer.observe("decode+split", 0.8, 2, {"decode": 0.6, "split": 0.2})
    balancer.observe("embed", 0.1, 1, {"embed": 0.1})
    # 1 GPU at 0.1 s per item allows 10 items/s; decode+split at 0.4 s per item needs 4 workers (4 CPUs)
    assert balancer.maybe_rebalance() == {"decode+split": 4, "embed": 1}
    decision = seen[-1]
    assert decision["workers"] == {"decode": 4, "split": 4, "embed": 1}
    assert decision["seconds_per_item"] == {"decode": 0.3, "split": 0.1, "embed": 0.1}
    assert decision["groups"]["decode+split"] == {"stages": ["decode", "split"], "seconds_per_item": 0.4, "workers": 4}
    assert decision["bottleneck"] in ("decode+split", "embed")


def test_a_fused_cpu_group_starts_with_a_worker_per_cpu_and_logs_its_first_measured_allocation():
    seen = []
    balancer = AutoBalancer([StageCost("a+b", 1.0, 0.0, ("a", "b"))], cpu_budget=2, interval_s=0.0, on_decision=seen.append)
    assert balancer.workers == {"a+b": 2}  # not 1 until a measurement: both CPUs work from the start
    balancer.observe("a+b", 0.5, 1, {"a": 0.2, "b": 0.3})
    assert balancer.maybe_rebalance() == {"a+b": 2}
    assert len(seen) == 1 and seen[0]["groups"]["a+b"]["workers"] == 2  # logged although unchanged
    balancer.maybe_rebalance()
    assert len(seen) == 1


@pytest.fixture()
def by_value():
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_a_fused_run_takes_each_item_through_every_stage_in_one_worker_call(ray_session, by_value):
    from vfm_curator.execution.ray_runner import RayRunner

    progress, decisions = {}, []
    runner = RayRunner([StageSpec(First), StageSpec(Second), StageSpec(Third)], balance_interval_s=0.0, cpu_budget=2.0,
                       on_progress=lambda s, n: progress.__setitem__(s, progress.get(s, 0) + n),
                       on_decision=decisions.append)
    assert [g.stages for g in runner.groups] == [("first", "second", "third")]
    out = list(runner.run(Item(id=i, path=[]) for i in range(12)))
    assert sorted(o["id"] for o in out) == list(range(12))
    for item in out:
        assert [name for name, _ in item["path"]] == ["first", "second", "third"]
        assert len({pid for _, pid in item["path"]}) == 1, item["path"]  # one call, one process
    assert progress == {"first": 12, "second": 12, "third": 12}
    assert runner.allocation == {"first": 2, "second": 2, "third": 2}  # 2 CPUs, 1 CPU per fused worker
    assert decisions and set(decisions[0]["seconds_per_item"]) == {"first", "second", "third"}


def test_a_worker_dying_inside_a_fused_call_fails_its_item_only_and_a_setup_error_names_its_stage(ray_session, by_value):
    from vfm_curator.execution.ray_runner import RayRunner

    failed = {}

    def failure(task, stage, reason, cause, kind):
        failed[task["id"]] = (stage, reason.split(":")[0], cause, kind)

    runner = RayRunner([StageSpec(First), StageSpec(Second), StageSpec(Third, {"kill_id": 3})], cpu_budget=2.0,
                       failure=failure)
    out = list(runner.run(Item(id=i, path=[]) for i in range(6)))
    assert sorted(o["id"] for o in out) == list(range(6))  # the dead call's item comes back, marked failed
    assert failed == {3: ("first+second+third", "first+second+third worker failed", "machine", "worker-crash")}
    assert all([n for n, _ in o["path"]] == ["first", "second", "third"] for o in out if o["id"] != 3)

    failed.clear()
    runner = RayRunner([StageSpec(First), StageSpec(Broken), StageSpec(Third)], cpu_budget=2.0, failure=failure)
    out = list(runner.run(Item(id=i, path=[]) for i in range(2)))
    assert failed == {i: ("broken", "broken worker failed", "config", "stage-setup") for i in range(2)}
