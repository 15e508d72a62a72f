"""Shards are the same bytes from run to run: samples go in the clip table's order whatever order the
Ray workers finish in, and tar members carry no clock time. A seeded loader reads samples by
position, so before this two runs on the same clips trained two different models."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

import vfm_curator
from vfm_curator.execution.ordering import InputOrder
from vfm_curator.execution.ray_runner import RayRunner
from vfm_curator.execution.serial import SerialRunner
from vfm_curator.execution.spec import StageSpec
from vfm_curator.stages.base import Resources, Stage
from vfm_curator.synth import make_video
from tests.curator.stage_items import Item

SHARD = {"tokenizer": "pixel", "text_encoder": "hash", "resolutions": [[32, 48]], "frames": [4],
         "tokenizer_options": {"patch": 2}, "patch_size": 2, "windows": 0}


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    """Curated clips whose first clip (a.mp4, first in the table) is far longer than the others, so
    under two Ray workers it finishes after clips that went in behind it."""
    root = tmp_path_factory.mktemp("order")
    shots = {"a": [240], "b": [12], "c": [12], "d": [12], "e": [12], "f": [12]}
    for i, (name, lengths) in enumerate(shots.items()):
        width, height = (640, 360) if name == "a" else (96, 64)  # a: ~30x the others' decode time
        make_video(root / "in" / f"{name}.mp4", lengths, width=width, height=height, seed=i)
        (root / "in" / f"{name}.txt").write_text(f"clip {name}")
    out = root / "clips"
    vfm_curator.curate(root / "in", out, {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.2}}})
    return out


def _digests(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.glob("*/shard-*.tar"))}


def _keys(out: Path) -> list[str]:
    import tarfile

    keys = []
    for shard in sorted(out.glob("*/shard-*.tar")):
        with tarfile.open(shard) as tar:
            keys += [m.name.split(".", 1)[0] for m in tar.getmembers() if m.name.endswith(".json")]
    return keys


def test_ray_sharding_writes_the_serial_runners_bytes_though_its_workers_finish_out_of_order(clips, tmp_path, ray_session):
    serial = vfm_curator.shard(clips, tmp_path / "serial", {"shard": SHARD, "run": {"runner": "serial"}})
    ray = vfm_curator.shard(clips, tmp_path / "ray", {"shard": SHARD, "run": {"runner": "ray", "num_cpus": 2}})
    assert serial.samples_written == ray.samples_written > 6
    assert _digests(tmp_path / "ray") == _digests(tmp_path / "serial")
    assert len(set(_keys(tmp_path / "ray"))) == len(_keys(tmp_path / "ray"))


def test_the_same_clips_sharded_twice_give_the_same_bytes(clips, tmp_path, ray_session):
    for run in ("one", "two"):
        vfm_curator.shard(clips, tmp_path / run, {"shard": SHARD, "run": {"runner": "ray", "num_cpus": 2}})
    assert _digests(tmp_path / "one") == _digests(tmp_path / "two")


def test_holding_new_input_while_one_clip_waits_neither_stalls_the_run_nor_loses_the_order(clips, tmp_path, ray_session,
                                                                                             monkeypatch):
    from vfm_curator.pipelines import sharding

    monkeypatch.setattr(sharding, "HELD_FOR_ORDER", 1)  # the runner holds input as soon as one clip waits
    vfm_curator.shard(clips, tmp_path / "serial", {"shard": SHARD, "run": {"runner": "serial"}})
    held = vfm_curator.shard(clips, tmp_path / "held", {"shard": SHARD, "run": {"runner": "ray", "num_cpus": 2}})
    assert held.written == 6 and _digests(tmp_path / "held") == _digests(tmp_path / "serial")


def test_input_order_hands_tasks_back_in_the_order_they_went_in():
    order = InputOrder(["a", "b", "c", "d"], limit=8)
    assert order.add("c", "C") == [] and order.add("b", "B") == []
    assert order.add("a", "A") == ["A", "B", "C"]
    assert order.add("d", "D") == ["D"] and order.rest() == []


def test_input_order_is_full_at_its_limit_and_passes_unknown_and_repeated_keys_through():
    order = InputOrder(["a", "b", "c"], limit=2)
    assert order.add("b", "B") == [] and not order.full
    assert order.add("c", "C") == [] and order.full
    assert order.add("zzz", "Z") == ["Z"]  # not one of the input's: no place to wait for
    assert order.add("b", "B again") == ["B again"]
    assert order.rest() == ["B", "C"] and not order.full


class DropFirst(Stage):
    """A stage that returns fewer tasks than it was given: item 0 never comes out."""

    name = "drop-first"

    def process(self, tasks):
        return [t for t in tasks if t["id"] != 0]


def test_input_order_skips_a_task_a_stage_dropped_once_the_runner_has_nothing_in_flight():
    items = [Item(id=i) for i in range(12)]
    order = InputOrder(range(12), limit=2)
    out, behind = [], 0
    for task in SerialRunner([StageSpec(DropFirst)]).run(order.feed(items), hold=lambda: order.full):
        out += order.add(task["id"], task)
        behind = max(behind, task["id"] - len(out))  # finished but still held
    out += order.rest()
    # item 0's place is given up at the first pull while full (nothing in flight): the rest in order,
    # never more than the limit held back
    assert [t["id"] for t in out] == list(range(1, 12)) and behind <= 2


class Lag(Stage):
    """Item 0 takes seconds, every other item none: the rest finish behind it."""

    name = "lag"
    resources = Resources(cpus=1.0, memory_mb=64)

    def process_one(self, task):
        if task["id"] == 0:
            time.sleep(3)


def test_input_order_never_lets_go_of_a_task_still_running_however_many_finish_behind_it(ray_session):
    # 12 items in flight at once (queue_size 8 x 2 workers), a limit of 2: 11 finish while item 0 runs,
    # more than any fixed multiple of the limit; item 0 is slow, not lost, and must keep its place
    items = [Item(id=i) for i in range(12)]
    order = InputOrder(range(12), limit=2)
    runner = RayRunner([StageSpec(Lag)], cpu_budget=2.0, queue_size=8)
    out = []
    for task in runner.run(order.feed(items), hold=lambda: order.full):
        out += order.add(task["id"], task)
    out += order.rest()
    assert [t["id"] for t in out] == list(range(12))


class _Stages:
    """A progress display that records which stages any clip went through."""

    def __init__(self):
        self.advanced = []

    def start(self, stages, total):
        pass

    def advance(self, stage, n):
        self.advanced.append(stage)

    def stop(self):
        pass


def test_a_source_date_epoch_that_is_no_time_stamp_is_refused_before_any_clip_is_worked_on(clips, tmp_path, monkeypatch):
    # the shard writer reads it at a bucket's first sample: after the clip's decode, tokenize and text encode
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    seen = _Stages()
    with pytest.raises(ValueError, match="SOURCE_DATE_EPOCH='yesterday' is not a time stamp"):
        vfm_curator.shard(clips, tmp_path / "out", {"shard": SHARD, "run": {"runner": "serial"}}, progress=seen)
    assert seen.advanced == []
