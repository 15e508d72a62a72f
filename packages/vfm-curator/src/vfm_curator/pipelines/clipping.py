"""The clipping pipeline: raw videos -> ``clips/*.mp4`` + ``clips.parquet`` + ``failures.jsonl``.

decode -> split -> stitch -> transcode -> embed -> caption -> filter -> write, on Ray (or in
process). Videos with a record in ``OUT/.state`` are skipped, so a re-run resumes; a failed one is
done again when :func:`vfm_curator.failures.should_retry` says so. ``clips.parquet`` is the union of
every finished video in the folder, whichever run made it.
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Iterator

from vfm_curator.config import CurateConfig
from vfm_curator.execution.spec import StageSpec
from vfm_curator.failures import check_retry, input_stamp, options_hash, should_retry
from vfm_curator.io import attempts, commits, input_index, staging, state
from vfm_curator.io.fingerprint import caption_digest, fingerprint
from vfm_curator.io.inputs import LeftOut, Source, expand
from vfm_curator.io.metadata import merge
from vfm_curator.io.paths import atomic_write, check_not_other_output, check_out_folder, disk_full, output_path, safe_join
from vfm_curator.io.state_format import check_state_format, mark_state_format
from vfm_curator.pipelines.summary import (
    Progress, Summary, failure_kinds, failure_line, listed_failures, uncaptioned,
)
from vfm_curator.stages.caption import sidecar_caption
from vfm_curator.tasks import VideoTask, video_id
from vfm_plugins import FolderLock
from vfm_plugins.files import remove_leftover


def stage_specs(config: CurateConfig, out: Path) -> list[StageSpec]:
    """The configured stages, built once here to check every option (ranges included) before any work."""
    from vfm_curator.plugins import host

    config.check()
    specs = []
    for name in config.stages:
        options = config.stage_options(name)
        if name == "stitch" and "max_clip_s" not in options and "max_clip_s" in config.stage_options("split"):
            options["max_clip_s"] = config.stage_options("split")["max_clip_s"]
        cls = host.get("stages", name)
        if "out" in cls.defaults:  # write, transcode (its staging files): the output folder
            options["out"] = str(out)
        stage = cls(**options)  # validate options now, in the driver, with a clear error
        # a stage whose options change what a worker needs (split with a network detector) says so
        specs.append(StageSpec(cls, options, getattr(stage, "configured_resources", None)))
    if not specs or specs[-1].name != "write":
        raise ValueError(f"the clipping pipeline must end with the 'write' stage; got {config.stages}")
    return specs


def run_clipping(
    inputs: list[str], out: str | Path, config: CurateConfig | None = None, *, progress: Progress | None = None,
    retry_failed: str | None = None, redo_changed: bool = False,
) -> Summary:
    """Check the options, the output folder and the inputs, then hold ``out``'s lock for the whole
    run: a second run into it fails with ``FolderLockedError`` naming this one, before it reads or
    deletes anything. ``retry_failed``: ``"all"``, a cause or a reason kind to run again.
    ``redo_changed``: clip again the finished videos whose file, caption or stage options changed
    (their clips are replaced; otherwise they are skipped and counted)."""
    out = Path(out).resolve()
    config = config or CurateConfig()
    retry = check_retry(retry_failed)
    check_out_folder(out)
    check_not_other_output(out, "vfm curate")
    check_state_format(out)  # a folder a newer vfm curated: refused before anything is written
    specs = stage_specs(config, out)
    left_out = LeftOut()
    sources = expand(list(inputs), exclude=out, left_out=left_out)
    if not sources:
        from vfm_curator.io.inputs import VIDEO_EXTENSIONS

        common = [".mp4", ".mov", ".mkv", ".avi", ".webm", ".ts", ".m2ts", ".mxf"]
        found = "".join(f"; not read: {folder}: {why}" for folder, why in list(left_out.not_read.items())[:3])
        found += f"; left out: {line}" if (line := left_out.line()) else ""
        raise ValueError(f"no video found in {', '.join(map(str, inputs))}{found}: a folder is searched (subfolders too) for "
                         f"files named like videos ({', '.join(common)} and {len(VIDEO_EXTENSIONS - set(common))} more, "
                         f"any letter case); name other files one by one or in a .jsonl/.csv manifest (the output folder "
                         f"{out} is never read as input)")
    try:
        with FolderLock(out):
            return _run_clipping(sources, out, specs, config, progress=progress, retry=retry, redo_changed=redo_changed,
                                 left_out=left_out)
    except OSError as exc:  # the lock file, the table...: a full disk is one line wherever it shows
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise disk_full(out) from exc
        raise


def _run_clipping(sources: list[Source], out: Path, specs: list[StageSpec], config: CurateConfig, *,
                  progress: Progress | None, retry: str | None, redo_changed: bool = False,
                  left_out: LeftOut | None = None) -> Summary:
    # Half-written files (never under a final name). We hold the folder's lock and have not started
    # any work, so none is a live run's or our own: each is left by a run that died (the kernel freed
    # its lock). Workers of a dead driver are ended with it (Ray ends a job's workers with its driver).
    # Only regular files: a link at such a name is no run's file (neither followed nor removed).
    # First the commits such a run wrote and did not carry out: their files are named by them.
    commits.finish_all(out)
    for leftover in out.rglob(".*.tmp"):
        remove_leftover(leftover)
    attempts.clear(out)  # attempts a killed run never took back
    mark_state_format(out)
    summary = Summary(out=str(out), videos=len(sources))
    if left_out is not None:
        summary.folders_not_read, summary.left_out = dict(left_out.not_read), left_out.line()
    hashes = _options_hashes(specs)
    todo: list[VideoTask] = []
    this_run: dict[tuple, str] = {}  # (fingerprint, caption digest) -> path, of this run's new paths
    claimed: set[str] = set()  # finished videos found moved (and recaptioned) to a path of this run
    changed_seen: set[str] = set()  # finished videos counted as moved and recaptioned (two copies: one video)
    for source in sources:
        task = VideoTask(source.path, caption=source.caption)
        if not _encodable(source.path):
            _record_bad_name(out, task)
            summary.skipped += 1
            continue
        record = state.load_record(out, task.vid)
        attempt = _attempt(out, record, task, hashes, config, retry)
        changed, what = (_changed_stage(record, hashes, specs), _changed_input(out, record, source)) if attempt is None else (None, None)
        if redo_changed and (changed or what):
            attempt, summary.redone = 1, summary.redone + 1
        elif attempt is None:
            summary.skipped += 1
            if changed is None and what is None and "redo_failure" in (record or {}):
                _drop_redo_failure(out, task.vid)
            if changed is not None:
                summary.other_options[changed] = summary.other_options.get(changed, 0) + 1
            if what is not None:
                summary.changed_inputs[what] = summary.changed_inputs.get(what, 0) + 1
            continue
        given = _input_of(source)
        replaces = None
        if record is None and given["fingerprint"] is not None:
            # a path the folder has not seen: maybe a video it has clipped, moved or copied
            key = (given["fingerprint"], given["caption"])
            if key in this_run:  # a second copy in this run is the same video too
                summary.copies[source.path] = this_run[key]
                continue
            earlier = _earlier_video(out, given, claimed)
            if earlier is not None and earlier[1]["input"].get("caption") == given["caption"]:
                summary.copies[source.path] = earlier[1].get("source", "")
                continue
            if earlier is not None:  # moved, and its caption changed: that video's input changed
                if not redo_changed:
                    summary.skipped += 1
                    if earlier[0] not in changed_seen:
                        changed_seen.add(earlier[0])
                        summary.changed_inputs["caption"] = summary.changed_inputs.get("caption", 0) + 1
                    continue
                claimed.add(earlier[0])
                replaces, summary.redone = {"video_id": earlier[0], "source": earlier[1]["source"]}, summary.redone + 1
            this_run[key] = source.path
        elif record is not None and record.get("status") != "ok":
            # a failed attempt to clip a moved video again in place of its old record (the attempt
            # died before the write stage, which replaces it): this retry goes on replacing it, else
            # its success would leave both in the table
            replaces = _still_replaced(out, record, given, claimed)
            if replaces is not None:
                claimed.add(replaces["video_id"])
        summary.retried += record is not None and not (changed or what)
        task.context = {"attempt": attempt, "input_stamp": given["stamp"], "input": given, "options_hashes": hashes}
        if replaces is not None:
            task.context["replaces"] = replaces  # the write stage deletes that video's record and clips
        todo.append(task)
    t0 = time.perf_counter()
    if todo:
        _execute(todo, specs, config, out, summary, progress)
    summary.wall_s = time.perf_counter() - t0
    finalize(out, summary, config)
    return summary


def _input_of(source: Source) -> dict:
    """What the video's record keeps of its input (:mod:`vfm_curator.io.fingerprint`)."""
    return {"stamp": input_stamp(source.path), "fingerprint": fingerprint(source.path),
            "caption": caption_digest(_caption_of(source))}


def _caption_of(source: Source) -> str | None:
    """The caption the caption stage attaches from the input (manifest, else sidecar file); None
    also for a sidecar that cannot be read (the caption stage fails that video, naming why: the
    plan does not end the run for it)."""
    if source.caption is not None:
        return source.caption
    try:
        return sidecar_caption(source.path)
    except OSError:
        return None


def _changed_input(out: Path, record: dict | None, source: Source) -> str | None:
    """How a finished video's input differs from what it was clipped from: "file" (other bytes at
    its path), "caption" (another manifest or sidecar caption), or None (the same, or unknown: a
    record from before inputs were kept, or a file that is gone). A file touched since (another
    stamp, the same bytes) has its record's stamp brought up to date, so later runs need only a stat."""
    kept = (record or {}).get("input") or {}
    if record is None or record.get("status") != "ok" or not kept:
        return None
    if caption_digest(_caption_of(source)) != kept.get("caption"):
        return "caption"
    stamp = input_stamp(source.path)
    if stamp is not None and stamp != kept.get("stamp"):  # touched or rewritten: the bytes decide
        now = fingerprint(source.path)
        if now is not None and now != kept.get("fingerprint"):
            return "file"
        if now is not None:
            # the driver holds the folder's lock and no attempt of this video runs: nothing else writes it
            state.write_record(out, video_id(source.path), {**record, "input": {**kept, "stamp": stamp}})
    return None


def _drop_redo_failure(out: Path, vid: str) -> None:
    """Take a failed redo off a finished video whose input and options are again those its clips were
    made from (a file restored, options set back): nothing is left to redo, and no run would clear
    it (only a redo that succeeds does), so failures.jsonl listed it for good. Read again: the
    record's stamp may have just been brought up to date (:func:`_changed_input`)."""
    record = state.load_record(out, vid)
    if record is not None:
        state.write_record(out, vid, {k: v for k, v in record.items() if k != "redo_failure"})


def _earlier_video(out: Path, given: dict, claimed: set[str]) -> tuple[str, dict] | None:
    """The finished video of the folder clipped from the bytes of ``given`` (:mod:`.io.input_index`):
    its id and record. One with the same caption (a copy, or moved) comes first; else one whose file
    is gone (moved, and recaptioned since: the same video, its caption changed). A copy beside its
    still-present original with another caption is none: it is clipped as its own video."""
    input_index.ensure(out)
    moved = None
    for vid in input_index.videos_with(out, given["fingerprint"]):
        record = state.load_record(out, vid)
        kept = (record or {}).get("input")
        if (record is None or record.get("status") != "ok" or not isinstance(kept, dict)
                or kept.get("fingerprint") != given["fingerprint"] or vid in claimed):
            continue
        if kept.get("caption") == given["caption"]:
            return vid, record
        source = record.get("source")
        if moved is None and isinstance(source, str) and video_id(source) == vid and not os.path.lexists(source):
            moved = vid, record
    return moved


def _still_replaced(out: Path, record: dict, given: dict, claimed: set[str]) -> dict | None:
    """The ``replaces`` a failed record keeps (:func:`vfm_curator.io.state.video_record`) when the
    video it names is still finished with the bytes this path holds now; None otherwise."""
    replaces = record.get("replaces")
    if not isinstance(replaces, dict) or not isinstance(replaces.get("video_id"), str) or replaces["video_id"] in claimed:
        return None
    vid = replaces["video_id"]
    if not state.VIDEO_ID.fullmatch(vid):
        return None
    earlier = state.load_record(out, vid)
    kept = (earlier or {}).get("input")
    if (earlier is None or earlier.get("status") != "ok" or not isinstance(kept, dict) or given["fingerprint"] is None
            or kept.get("fingerprint") != given["fingerprint"]):
        return None
    return {"video_id": vid, "source": earlier.get("source")}


def _options_hashes(specs: list[StageSpec]) -> dict[str, str]:
    """stage -> hash of the options of the stages up to it ("*": all), recorded with a failure."""
    pairs = [(s.name, s.options) for s in specs]
    return {"*": options_hash(pairs, ""), **{name: options_hash(pairs, name) for name, _ in pairs}}


def _attempt(out: Path, record: dict | None, task: VideoTask, hashes: dict[str, str], config: CurateConfig,
             retry: str | None) -> int | None:
    """The attempt number to run ``task`` as, or None to skip it (finished, or failed for good)."""
    if record is None:
        return 1
    if record.get("status") == "ok":
        # an ok record whose metadata part is gone (edited by hand) is redone, not silently dropped
        return None if state.part_path(out, task.vid).exists() else 1
    failure = record.get("failure") or {}
    stage = failure.get("stage")
    if not should_retry(failure, retry=retry, max_attempts=config.max_attempts,
                        options_digest=hashes.get(stage, hashes["*"]), stamp=input_stamp(task.source)):
        return None
    automatic = failure.get("cause") == "machine" and retry is None
    return int(failure.get("attempts", 1)) + 1 if automatic else 1


def _changed_stage(record: dict | None, hashes: dict[str, str], specs: list[StageSpec]) -> str | None:
    """The first stage whose options (with those before it) differ from the ones a finished video's
    record was made with; None when they are the same, or unknown (a record from before they were kept)."""
    made = (record or {}).get("options_hashes") or {}
    if (record or {}).get("status") != "ok" or not made or made.get("*") == hashes["*"]:
        return None
    return next((s.name for s in specs if made.get(s.name) != hashes[s.name]), specs[-1].name)


def _encodable(path: str) -> bool:
    try:
        path.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _record_bad_name(out: Path, task: VideoTask) -> None:
    """A file name that is not UTF-8 fails that one file (its name shown as repr); the rest runs."""
    task.fail("input", f"file name is not UTF-8: {task.source!r}; rename it to UTF-8 text", "input", "bad-name")
    state.write_record(out, task.vid, state.video_record(task))


def _execute(todo: list[VideoTask], specs: list[StageSpec], config: CurateConfig, out: Path, summary: Summary, progress) -> None:
    """Run ``todo``; a video failed by the machine (crash, out of memory, timeout) is run again, up to
    ``config.max_attempts`` attempts in all."""

    def advance(stage: str, n: int) -> None:
        if progress is not None:
            progress.advance(stage, n)

    try:
        _run_all(todo, specs, config, out, summary, progress, advance)
    finally:  # staging files of calls that never reached the write stage (a stop, an interrupt)
        staging.sweep_all(out)


def _run_all(todo: list[VideoTask], specs: list[StageSpec], config: CurateConfig, out: Path, summary: Summary,
             progress, advance) -> None:
    from vfm_curator.execution.runner import open_runner

    with open_runner(specs, config, out, advance) as runner:
        if progress is not None:
            progress.start([s.name for s in specs], len(todo))
        try:
            pending = todo
            while pending:
                again = []
                for task in runner.run(_handed_out(pending, out)):
                    summary.processed += not task.context.get("requeued", False)
                    summary.video_s_processed += task.duration
                    if task.meta.get("decoder"):  # which backend the decode stage used (auto picks one)
                        summary.decoders[task.meta["decoder"]] = summary.decoders.get(task.meta["decoder"], 0) + 1
                    failure = _settle(out, task)
                    if not failure and _changed_while_curated(task):
                        summary.changed_while_curated.append(task.source)
                    attempt = int(task.context.get("attempt", 1))
                    if failure.get("cause") == "machine" and attempt < config.max_attempts:
                        again.append(VideoTask(task.source, caption=task.caption,
                                               context={**task.context, "attempt": attempt + 1, "requeued": True}))
                pending = again
        finally:
            if progress is not None:
                progress.stop()
    summary.workers = dict(getattr(runner, "peak_workers", runner.allocation))
    summary.fused = [list(g.stages) for g in getattr(runner, "groups", []) if len(g.stages) > 1]
    summary.decisions = list(runner.decisions)


def _changed_while_curated(task: VideoTask) -> bool:
    """Whether a finished video's file has another size or time than when the run planned it (the
    stamp its record keeps): a file still being copied was clipped from the part that was there, and
    the next run names it as changed (``--redo-changed`` clips it again). A file gone since (moved
    away, deleted) is not: it was read whole, and there is nothing to clip again."""
    planned, now = task.context.get("input_stamp"), input_stamp(task.source)
    return planned is not None and now is not None and now != planned


def _handed_out(tasks: list[VideoTask], out: Path) -> Iterator[VideoTask]:
    """Each task as the runner takes it, with a new attempt token: from then on only this attempt
    of its video may write (:mod:`vfm_curator.io.attempts`)."""
    for task in tasks:
        task.context["fence"] = attempts.open_fence(out, task.vid)
        yield task


def _settle(out: Path, task: VideoTask) -> dict:
    """Take a video's task back from the runner; returns the failure its attempt ended with ({}: ok).

    Under the video's lock, and after closing its fence so that no attempt of it writes any more (a
    call cancelled for the stage timeout may still run): a commit its write stage wrote is carried
    out (:mod:`vfm_curator.io.commits`), its staging files are deleted (a worker
    killed between transcode and write left them), and a failure that the write stage never
    recorded (its call died or was cancelled) is recorded here. A record the attempt did write is
    kept as it is, also one made by a cancelled call that finished its writes first: that video is
    done, not failed."""
    with attempts.settle(out, task.vid):
        commits.finish(out, task.vid)  # one its write stage wrote and could not carry out (killed, failed)
        staging.sweep(out, task.vid)
        record = state.load_record(out, task.vid)
        if record is not None and record.get("attempt_id") == task.context.get("fence"):
            return record.get("failure") or {}
        if task.failure is not None:  # a failed redo of a finished video keeps its ok record
            state.record_failure(out, task)
    return task.failure or {}


def _remove_orphans(out: Path, records: list[dict]) -> list[str]:
    """The clip files of forgotten videos that no finished video's clips name (left by a run killed
    while it replaced a video's clips), deleted; named is read from the table just merged, before
    the review takes rows out of it (a near-duplicate's file stays). Filtered clips keep their thumbnails."""
    import pyarrow.parquet as pq

    from vfm_curator.io.orphans import remove_forgotten_clips

    named = set(pq.read_table(safe_join(out, "clips.parquet"), columns=["id"]).column("id").to_pylist())
    filtered = {str(e.get("id")) for r in records for e in (r.get("filtered") or []) if isinstance(e, dict)}
    return remove_forgotten_clips(out, named, filtered)


def finalize(out: Path, summary: Summary, config: CurateConfig | None = None) -> None:
    """Rebuild ``clips.parquet`` from every finished video of the folder (the union of all runs),
    apply the whole-folder checks (caption QA thresholds, dedup: vfm_curator.pipelines.review), and
    write failures.jsonl, summary.json and report.html over the whole folder."""
    from vfm_curator.io.report import write_report

    records = list(state.records(out))
    ok = [r for r in records if r.get("status") == "ok" and state.part_path(out, r["video_id"]).exists()]
    failed = [r for r in records if r.get("status") != "ok"]
    parts = [state.part_path(out, r["video_id"]) for r in ok]
    summary.clips = merge(parts, output_path(out, "clips.parquet"))
    summary.orphans_removed = len(_remove_orphans(out, records))
    from vfm_curator.pipelines.review import review_folder

    review = review_folder(out, config)
    summary.duplicates = review.count("dedup", "removed")
    summary.captions_flagged = review.count("caption_qa", "flagged")
    summary.captions_dropped = review.count("caption_qa", "removed")
    summary.clips -= len(review.removed)
    summary.uncaptioned = uncaptioned(safe_join(out, "clips.parquet"))
    listed = listed_failures(ok, failed)  # and the failed redos of finished videos, which kept their clips
    lines = [json.dumps(failure_line(r), sort_keys=True) for r in listed]
    atomic_write(output_path(out, "failures.jsonl"), ("\n".join(lines) + "\n" if lines else "").encode("utf-8"))
    summary.failures = len(listed)
    summary.failure_kinds = failure_kinds(listed)
    summary.videos_total = sum(state.video_counts(ok, failed)[:2])  # a moved video's failed redo is not another video
    summary.decoded_short = sum(1 for r in ok if (r.get("meta") or {}).get("decoded_short"))
    summary.hours_in = sum(r.get("duration_s", 0.0) for r in ok) / 3600
    # the clips in clips.parquet: what the review took out (dedup, caption QA drops) is not output
    removed_s = sum(e.get("end_s", 0.0) - e.get("start_s", 0.0) for e in review.removed)
    summary.hours_out = (sum(r.get("clip_seconds", 0.0) for r in ok) - removed_s) / 3600
    summary.throughput = summary.video_s_processed / summary.wall_s if summary.wall_s > 0 else 0.0
    atomic_write(output_path(out, "summary.json"), json.dumps(summary.as_dict(), indent=2, default=str).encode("utf-8"))
    write_report(out, summary, ok, failed, listed)
    commits.table_rebuilt(out)  # last: a run killed before here is finished by the next (vfm shard refuses till then)
