"""A call cancelled for running past ``stage_timeout_s`` is over when its tasks come back failed: its
worker is killed asynchronously, and one still alive could write (staging files, its video's
record) over what the video's next attempt writes; a loaded CI machine showed exactly that, a
timed-out attempt's failure record landing over a later run's success."""

from __future__ import annotations

import os
import time

from vfm_curator.execution.ray_runner import RayRunner
from vfm_curator.execution.spec import StageSpec
from tests.curator.stage_items import Item
from vfm_curator.stages.base import Resources, Stage


class Spin(Stage):
    """Writes its worker's pid to the item's file, then spins past any timeout."""

    name = "spin"
    resources = Resources(cpus=1.0, memory_mb=64)

    def process_one(self, task):
        with open(task["pid_file"], "w") as fh:
            fh.write(str(os.getpid()))
        end = time.monotonic() + 60
        while time.monotonic() < end:
            pass


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs: a zombie (killed, not yet reaped by Ray's raylet) writes nothing."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            state = fh.read().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: the signal test (a zombie counts as alive there)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")


def test_a_timed_out_calls_worker_is_gone_when_its_task_comes_back_failed(tmp_path, ray_session):
    failed = []

    def failure(task, stage, reason, cause, kind):
        failed.append(kind)

    runner = RayRunner([StageSpec(Spin)], cpu_budget=1.0, stage_timeout_s=1.0, failure=failure)
    pid_file = tmp_path / "pid"
    (item,) = runner.run([Item(id=0, pid_file=str(pid_file))])
    assert failed == ["timeout"] and item["id"] == 0
    pid = int(pid_file.read_text())
    assert not _alive(pid), f"the cancelled call's worker {pid} still runs after its task came back"
