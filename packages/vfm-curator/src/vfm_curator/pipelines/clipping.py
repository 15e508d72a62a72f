"""The clipping pipeline: raw videos -> ``clips/*.mp4`` + ``clips.parquet`` + ``failures.jsonl``.

decode -> split -> stitch -> transcode -> embed -> caption -> filter -> write, on Ray (or in
process). Videos that already have a record in ``OUT/.state`` are skipped, so a re-run resumes.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from vfm_curator.config import CurateConfig
from vfm_curator.execution.spec import StageSpec
from vfm_curator.io import state
from vfm_curator.io.inputs import Source, expand
from vfm_curator.io.metadata import merge
from vfm_curator.io.paths import atomic_write, safe_join
from vfm_curator.tasks import VideoTask
from vfm_plugins import FolderLock


class Progress(Protocol):
    """What a progress display implements (the CLI's rich bars do)."""

    def start(self, stages: list[str], total: int) -> None: ...

    def advance(self, stage: str, n: int) -> None: ...

    def stop(self) -> None: ...


@dataclass
class Summary:
    """What a run did. ``*_total`` fields describe the whole output folder (all runs)."""

    out: str
    videos: int = 0  # inputs named this time
    processed: int = 0  # videos run this time
    skipped: int = 0  # already finished by an earlier run
    failures: int = 0  # failed videos in the output folder
    clips: int = 0  # clips in clips.parquet
    hours_in: float = 0.0  # video hours of every finished input (ok ones)
    hours_out: float = 0.0  # clip hours written
    wall_s: float = 0.0
    video_s_processed: float = 0.0  # seconds of video run through this time
    throughput: float = 0.0  # video seconds per wall second, this run
    workers: dict[str, int] = field(default_factory=dict)  # final auto-balancer allocation
    decisions: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def stage_specs(config: CurateConfig, out: Path) -> list[StageSpec]:
    from vfm_curator.plugins import host

    specs = []
    for name in config.stages:
        options = config.stage_options(name)
        if name == "write":
            options["out"] = str(out)
        if name == "stitch" and "max_clip_s" not in options and "max_clip_s" in config.stage_options("split"):
            options["max_clip_s"] = config.stage_options("split")["max_clip_s"]
        cls = host.get("stages", name)
        cls(**options)  # validate options now, in the driver, with a clear error
        specs.append(StageSpec(cls, options))
    if not specs or specs[-1].name != "write":
        raise ValueError(f"the clipping pipeline must end with the 'write' stage; got {config.stages}")
    return specs


def run_clipping(
    inputs: list[str], out: str | Path, config: CurateConfig | None = None, *, progress: Progress | None = None,
) -> Summary:
    """Holds ``out``'s lock for the whole run: a second run into it fails with ``FolderLockedError``
    naming this one, before it reads or deletes anything."""
    out = Path(out).resolve()
    with FolderLock(out):
        return _run_clipping(inputs, out, config, progress=progress)


def _run_clipping(inputs: list[str], out: Path, config: CurateConfig | None, *, progress: Progress | None) -> Summary:
    config = config or CurateConfig()
    sources = expand(list(inputs))
    if not sources:
        raise ValueError(f"no video found in {', '.join(map(str, inputs))}")
    specs = stage_specs(config, out)
    # Half-written files (never under a final name). We hold the folder's lock and have not started
    # any work, so none is a live run's or our own: each is left by a run that died (the kernel freed
    # its lock). Workers of a dead driver are ended with it (Ray ends a job's workers with its driver).
    for leftover in out.rglob(".*.tmp"):
        leftover.unlink(missing_ok=True)
    done = state.finished(out)
    todo = [s for s in sources if VideoTask(s.path).vid not in done]
    summary = Summary(out=str(out), videos=len(sources), skipped=len(sources) - len(todo))
    t0 = time.perf_counter()
    if todo:
        _execute(todo, specs, config, out, summary, progress)
    summary.wall_s = time.perf_counter() - t0
    finalize(out, sources, summary)
    return summary


def _execute(todo: list[Source], specs: list[StageSpec], config: CurateConfig, out: Path, summary: Summary, progress) -> None:
    from vfm_curator.execution.runner import open_runner

    def advance(stage: str, n: int) -> None:
        if progress is not None:
            progress.advance(stage, n)

    tasks = (VideoTask(s.path, caption=s.caption) for s in todo)
    with open_runner(specs, config, out, advance) as runner:
        if progress is not None:
            progress.start([s.name for s in specs], len(todo))
        try:
            for task in runner.run(tasks):
                summary.processed += 1
                summary.video_s_processed += task.duration
                if task.failure is not None and not state.record_path(out, task.vid).exists():
                    # the write stage itself never ran for it (its worker died): record the failure here
                    state.write_record(out, task.vid, {"video_id": task.vid, "source": task.source, "status": "failed",
                                                       "failure": task.failure, "duration_s": task.duration, "clips": 0})
        finally:
            if progress is not None:
                progress.stop()
    summary.workers = dict(getattr(runner, "peak_workers", runner.allocation))
    summary.decisions = list(runner.decisions)


def finalize(out: Path, sources: list[Source], summary: Summary) -> None:
    """Merge the metadata parts of the named inputs, write failures.jsonl, summary.json, report.html."""
    from vfm_curator.io.report import write_report

    wanted = {VideoTask(s.path).vid for s in sources}
    records = [r for r in state.records(out) if r.get("video_id") in wanted]
    ok = [r for r in records if r.get("status") == "ok"]
    failed = [r for r in records if r.get("status") != "ok"]
    parts = [state.part_path(out, r["video_id"]) for r in ok if state.part_path(out, r["video_id"]).exists()]
    summary.clips = merge(parts, safe_join(out, "clips.parquet"))
    lines = [json.dumps({"source": r["source"], **(r.get("failure") or {})}, sort_keys=True) for r in failed]
    atomic_write(safe_join(out, "failures.jsonl"), ("\n".join(lines) + "\n" if lines else "").encode("utf-8"))
    summary.failures = len(failed)
    summary.hours_in = sum(r.get("duration_s", 0.0) for r in ok) / 3600
    summary.hours_out = sum(r.get("clip_seconds", 0.0) for r in ok) / 3600
    summary.throughput = summary.video_s_processed / summary.wall_s if summary.wall_s > 0 else 0.0
    atomic_write(safe_join(out, "summary.json"), json.dumps(summary.as_dict(), indent=2, default=str).encode("utf-8"))
    write_report(out, summary, ok, failed)
