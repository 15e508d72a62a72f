"""Opening the configured runner for a pipeline: in-process, or on Ray with the auto-balancer."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from vfm_curator.config import CurateConfig
from vfm_curator.execution.spec import StageSpec
from vfm_curator.io.paths import append_line, output_path


@contextmanager
def open_runner(specs: list[StageSpec], config: CurateConfig, out: Path,
                on_progress: Callable[[str, int], None]) -> Iterator[Any]:
    """The runner ``config`` asks for. On Ray, the balancer's decisions are appended to
    ``OUT/balancer.jsonl``, a stage that no node can hold is an error before anything is queued,
    and a Ray instance this call started is shut down on exit."""
    if config.runner == "serial":
        from vfm_curator.execution.serial import SerialRunner

        yield SerialRunner(specs, on_progress=on_progress)
        return

    from vfm_curator.execution.ray_runner import RayRunner
    from vfm_curator.execution.session import ensure_ray

    def log_decision(decision: dict) -> None:
        append_line(output_path(out, "balancer.jsonl"), json.dumps(decision))  # a link at the name is replaced

    owned = ensure_ray(config.ray_address, config.num_cpus, config.num_gpus, connect_timeout_s=config.connect_timeout_s)
    try:
        check_feasible(specs)
        yield RayRunner(specs, queue_size=config.queue_size, balance_interval_s=config.balance_interval_s,
                        fixed_workers=config.workers, on_progress=on_progress, on_decision=log_decision,
                        stage_timeout_s=config.stage_timeout_s,
                        failure=lambda task, stage, reason, cause, kind: task.fail(stage, reason, cause, kind))
    finally:
        if owned:
            import ray

            ray.shutdown()


def check_feasible(specs: list[StageSpec]) -> None:
    """Ray waits forever for a task no node can hold: say so instead (e.g. a loaded machine leaves a
    local Ray less memory than a stage declares)."""
    import ray

    have = ray.cluster_resources()
    for spec in specs:
        need = spec.declared()
        for what, asked, total in (("CPUs", need.cpus, have.get("CPU", 0.0)), ("GPUs", need.gpus, have.get("GPU", 0.0)),
                                   ("MB of memory", need.memory_mb, have.get("memory", 0.0) / 2**20)):
            if asked > total:
                raise ValueError(f"stage {spec.name!r} asks for {asked:g} {what} per worker but the Ray cluster has "
                                 f"{total:.0f}; give Ray more or run with runner = 'serial'")
