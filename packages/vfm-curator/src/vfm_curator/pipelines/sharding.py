"""The sharding pipeline: curated clips -> per-bucket WebDataset shards, energon metadata, a blend file.

``shard_decode -> shard_tokenize -> shard_text`` run on Ray with the auto-balancer (or in process),
the same runners as the clipping pipeline; the driver writes each finished sample into its bucket's
vfm-data shard writer (see :mod:`vfm_curator.pipelines.shard_files`). Output::

    SHARDS/<H>x<W>x<T>/shard-000000.tar ... + .nv-meta/   one energon dataset per bucket
    SHARDS/<H>x<W>x<T>/val-000000.tar ...   its val split part (val_fraction > 0: clips held out by source video)
    SHARDS/blend.yaml      energon metadataset listing every bucket, weight = its sample count (per split)
    SHARDS/buckets.json    per bucket: shape, samples, tokens, bytes, shards
    SHARDS/failures.jsonl  clips that failed (decode, missing caption, ...), one JSON object per line
    SHARDS/summary.json

Re-running skips clips already in finished shards and clips that failed (``SHARDS/.state/failed``)
unless :func:`vfm_curator.failures.should_retry` says to do them again (``--retry-failed``, a
machine failure under ``run.max_attempts``, changed options or a changed clip); a killed run leaves
only complete shards. Every run checks each bucket's energon index against its shards on disk and
rebuilds it when they differ (a run killed before or inside ``prepare_dataset``).
"""

from __future__ import annotations

import errno
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from vfm_curator.execution.ordering import InputOrder
from vfm_curator.execution.spec import StageSpec
from vfm_curator.failures import check_retry, options_hash, should_retry
from vfm_curator.io.paths import check_not_other_output, check_out_folder, disk_full
from vfm_curator.pipelines import shard_state
from vfm_curator.pipelines.clip_table import curation_failures, read_clip_table
from vfm_curator.pipelines.shard_changes import changed_and_removed, drop_clips, note_sharded
from vfm_curator.pipelines.shard_config import BUCKETING, IDENTITY, SHARD_STAGES, ShardConfig
from vfm_curator.pipelines.shard_files import (
    BucketWriters, both_splits, finished_keys, finished_split_keys, remove_leftovers,
)
from vfm_curator.pipelines.shard_finalize import _finalize
from vfm_curator.pipelines.shard_partial import clip_keys, held_clips, recorded_spans, stale_windows
from vfm_curator.pipelines.shard_settings import _bucketing_notice, _check_identity, _windows_raised, check_shard_config_format
from vfm_curator.pipelines.shard_pins import SplitPins
from vfm_curator.pipelines.shard_split import check_val_fraction, fallback_notice, set_split_keys
from vfm_curator.pipelines.shard_summary import (
    CROP_COUNTED, CROP_NOTICE, UPSCALE_NOTICE, ShardSummary, _changed_notice, _count_resize, _cut_short_notice,
    _resize_notices,
)
from vfm_curator.pipelines.shard_tokens import _check_buckets, _tokens_per_sample
from vfm_curator.pipelines.summary import Progress
from vfm_curator.stages.shard_task import ShardTask
from vfm_plugins import FolderLock

# The run's parts live in the modules imported above (config, clip table, tokens, settings,
# summary, finalize); their public names stay importable from here, the pipeline's old home.
__all__ = ["BUCKETING", "CROP_COUNTED", "CROP_NOTICE", "IDENTITY", "NO_CAPTION", "SHARD_STAGES", "UPSCALE_NOTICE",
           "ShardConfig", "ShardSummary", "read_clip_table", "run_sharding", "shard"]


#: The reason a clip without a caption fails when captions are required.
NO_CAPTION = ("no caption, and captions are required: caption the clips (vfm curate with a captioner, or <video>.txt "
              "sidecars) or shard them unconditional with --no-require-captions ([shard] require_captions = false)")


def run_sharding(clips_dir: str | Path, out: str | Path, config: ShardConfig | None = None, *,
                 progress: Progress | None = None, retry_failed: str | None = None,
                 redo_changed: bool = False) -> ShardSummary:
    """Check the options and folders, then hold ``out``'s lock for the whole run: a second run into
    it fails with ``FolderLockedError`` naming this one, before it reads or deletes anything.
    ``retry_failed``: ``"all"``, a cause or a reason kind of failed clips to run again.
    ``redo_changed``: take the samples of clips changed in (or gone from) the clip table since they
    were sharded out of the shards, and shard the changed ones again (:mod:`.shard_changes`)."""
    out = Path(out).resolve()
    config = config or ShardConfig()
    config = replace(config, val_fraction=check_val_fraction(config.val_fraction))
    retry = check_retry(retry_failed)
    check_out_folder(out)
    check_not_other_output(out, "vfm shard")
    check_shard_config_format(out)  # a shards folder a newer vfm made: refused before anything is written
    clips_dir = Path(clips_dir).resolve()
    specs = config.stage_specs()
    try:
        with FolderLock(out):
            return _run_sharding(clips_dir, out, config, specs, progress=progress, retry=retry, redo_changed=redo_changed)
    except OSError as exc:  # the lock file, a shard, an index...: a full disk is one line wherever it shows
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise disk_full(out) from exc
        raise


def _run_sharding(clips_dir: Path, out: Path, config: ShardConfig, specs: list[StageSpec], *,
                  progress: Progress | None, retry: str | None, redo_changed: bool = False) -> ShardSummary:
    tokenizer = _check_buckets(config)
    tasks = read_clip_table(clips_dir)
    fallbacks = set_split_keys(clips_dir, tasks)
    out.mkdir(parents=True, exist_ok=True)
    _check_identity(out, config)
    remove_leftovers(out)  # we hold the lock and have written nothing: every temporary shard is a dead run's
    by_split = finished_split_keys(out)  # bucket -> split part -> sample keys in its finished shards
    finished = both_splits(by_split)
    # read before redo_changed takes changed clips out: re-sharded, they go back to their videos' side
    pins = SplitPins(out, tasks, by_split, config.val_fraction)
    done = set().union(*finished.values())
    hashes = _options_hashes(specs, config)
    summary = ShardSummary(out=str(out), clips=len(tasks), clips_dir=str(clips_dir), val_fraction=config.val_fraction,
                           curation_failures={} if tasks else curation_failures(clips_dir),
                           split_key_fallbacks=fallbacks if config.val_fraction else {})
    changed, removed = changed_and_removed(out, tasks, done, clips_dir)
    if redo_changed and (changed or removed):
        summary.samples_dropped = drop_clips(out, changed | removed)
        summary.resharded = len(changed)
        finished = finished_keys(out)
        done = set().union(*finished.values())
    else:
        summary.changed_since, summary.removed_since = len(changed), len(removed)
    # windows raised since the last run: a finished clip is run again for the windows it lacks, in the
    # bucket that holds it (_windows_raised refuses the run when the other bucket options changed too)
    top_up = _windows_raised(out, config, sum(t.id in done for t in tasks))
    todo, again = [], []
    for task in tasks:
        if task.id in done:
            # a changed clip not redone keeps its old samples as they are: windows of its new
            # version beside them would mix two versions of one clip (the notice names it)
            if top_up and task.id not in changed:
                again.append(task)
            else:
                summary.skipped += 1
            continue
        record = shard_state.load_failure(out, task.id)
        if record is not None:
            digest = hashes.get(record.get("stage"), hashes["*"])
            if not should_retry(record, retry=retry, max_attempts=config.execution.max_attempts,
                                options_digest=digest, stamp=shard_state.clip_stamp(task)):
                summary.failed_before += 1
                continue
            summary.retried += 1
            automatic = record.get("cause") == "machine" and retry is None
            task.attempt = int(record.get("attempts", 1)) + 1 if automatic else 1
        todo.append(task)
    summary.tried = len(todo)
    if config.require_captions:
        for task in todo:
            if not (task.caption or "").strip():
                task.fail("caption", NO_CAPTION, "config", "no-caption")
                shard_state.write_failure(out, task, hashes["caption"])
        todo = [t for t in todo if t.failure is None]
    t0 = time.perf_counter()
    if todo or again:
        _execute(todo + again, specs, config, out, summary, hashes, progress, finished,
                 held_clips(out, finished, {t.id for t in again}) if again else {}, pins)
    summary.wall_s = time.perf_counter() - t0
    summary.throughput = summary.samples_written / summary.wall_s if summary.wall_s > 0 else 0.0
    summary.notices = (_resize_notices(summary, config) + _cut_short_notice(summary)
                       + _bucketing_notice(out, config, summary.skipped) + _changed_notice(summary)
                       + fallback_notice(summary.split_key_fallbacks, len(tasks), clips_dir))
    _finalize(out, summary, {t.id: t.split_key for t in tasks}, lambda b: _tokens_per_sample(tokenizer, b, config))
    return summary


def _options_hashes(specs: list[StageSpec], config: ShardConfig) -> dict[str, str]:
    """stage -> hash of the options up to it (``"*"``: all; ``"caption"``: require_captions)."""
    pairs = [(s.name, s.options) for s in specs]
    return {"*": options_hash(pairs, ""), "caption": options_hash([("caption", {"require_captions": config.require_captions})], "caption"),
            **{name: options_hash(pairs, name) for name, _ in pairs}}


# Finished clips held back at most, waiting for an earlier one so that shards are written in the
# clip table's order (each holds its latents: a few MB for a long clip at a large bucket).
HELD_FOR_ORDER = 64


def _execute(todo: list[ShardTask], specs: list[StageSpec], config: ShardConfig, out: Path, summary: ShardSummary,
             hashes: dict[str, str], progress: Progress | None, finished: dict[str, set[str]],
             held: dict[str, tuple[str, dict[str, tuple[float, float]]]], pins: SplitPins) -> None:
    """``held``: clip id -> (bucket, recorded spans of its windows there), for the clips already in
    finished shards that are run again only to add their missing windows (see _top_up); ``pins``:
    which split part each clip goes to."""
    from vfm_curator.execution.runner import open_runner
    from vfm_data.writer import member_mtime

    member_mtime()  # a bad SOURCE_DATE_EPOCH fails here, not at a bucket's first sample after its clip's work

    def advance(stage: str, n: int) -> None:
        if progress is not None:
            progress.advance(stage, n)

    with open_runner(specs, config.execution, out, advance) as runner:
        writers = BucketWriters(out, max_shard_bytes=config.max_shard_bytes, array_format=config.array_format,
                                latent_dtype=config.latent_dtype, tokenizer=config.tokenizer, text_encoder=config.text_encoder,
                                extra={"tokenizer_options": config.tokenizer_options, "text_encoder_options": config.text_encoder_options},
                                val_fraction=config.val_fraction)
        if progress is not None:
            progress.start([s.name for s in specs] + ["write"], len(todo))
        def write(task: ShardTask) -> None:
            summary.processed += 1
            for stage, seconds in task.timings.items():
                summary.stage_seconds[stage] = summary.stage_seconds.get(stage, 0.0) + seconds
            t_write = time.perf_counter()
            if task.id in held:
                _top_up(task, *held[task.id], pins.of(task), writers, finished, summary)
            else:
                _write(task, writers, finished, out, summary, hashes, pins.of(task))
            summary.stage_seconds["write"] = summary.stage_seconds.get("write", 0.0) + time.perf_counter() - t_write
            advance("write", 1)

        # samples go into the shards in the clip table's order, not in the order workers finish:
        # the same clips and config give the same shards (and so the same seeded training) every run
        order = InputOrder([t.id for t in todo], limit=HELD_FOR_ORDER)
        try:
            for finished_task in runner.run(order.feed(todo), hold=lambda: order.full):
                for task in order.add(finished_task.id, finished_task):
                    write(task)
            for task in order.rest():
                write(task)
        except BaseException:
            writers.abort()  # interrupted: only complete shards stay
            raise
        else:
            writers.close()
        finally:
            if progress is not None:
                progress.stop()
    summary.workers = dict(getattr(runner, "peak_workers", runner.allocation))
    summary.decisions = list(runner.decisions)


def _write(task: ShardTask, writers: BucketWriters, finished: dict[str, set[str]], out: Path, summary: ShardSummary,
           hashes: dict[str, str], split: str) -> None:
    """Write a finished task's samples into split part ``split``, or record its failure."""
    if task.failure is None and (task.latent is None or task.text is None):
        task.fail("write", f"no {'latent' if task.latent is None else 'text embedding'} after the last stage")
    stale = []
    if task.failure is None:
        stale = stale_windows(task, recorded_spans(out / task.bucket, clip_keys(task, finished.get(task.bucket, set()))))
    if stale:
        task.fail("write", f"window(s) {', '.join(stale)} of this clip are in finished shards of {task.bucket} from an "
                  "interrupted run with another frame_stride (their spans differ from this run's); resume with that "
                  "run's frame_stride to finish the clip, or shard into a new folder", "config", "stale-windows")
    if task.failure is not None:
        shard_state.write_failure(out, task, hashes.get(task.failure["stage"], hashes["*"]))
        return
    # a window counts as written only in the bucket the clip goes to now: one left in another
    # bucket by a run killed under other frames / resolutions holds other frames
    summary.samples_written += writers.write(task, done=finished.get(task.bucket, set()), split=split)
    note_sharded(out, task, split)
    shard_state.clear_failure(out, task.id)
    summary.written += 1
    summary.cut_short += task.cut_short
    _count_resize(summary, task)


def _top_up(task: ShardTask, bucket: str, spans: dict[str, tuple[float, float]], split: str, writers: BucketWriters,
            finished: dict[str, set[str]], summary: ShardSummary) -> None:
    """Write the windows a clip sharded before lacks, into the bucket that holds it. A clip that now
    fails, fits another bucket, or whose windows there (``spans``: as recorded) were made with a
    frame_stride changed since keeps the samples it has (counted as skipped, which the
    bucket-options warning reports): windows added under this run's stride would leave frames out."""
    if (task.failure is None and task.latent is not None and task.text is not None and task.bucket == bucket
            and not stale_windows(task, spans)):
        added = writers.write(task, done=finished.get(bucket, set()), split=split)
        summary.samples_written += added
        summary.topped_up += bool(added)
        summary.cut_short += bool(added) and task.cut_short
        summary.skipped += not added
    else:
        summary.skipped += 1


def shard(clips_dir: str | Path, out: str | Path, config: ShardConfig | dict[str, Any] | str | Path | None = None, *,
          progress: Progress | None = None, retry_failed: str | None = None, redo_changed: bool = False,
          **overrides: Any) -> ShardSummary:
    """Shard the curated clips of ``clips_dir`` (``vfm curate``'s output) into ``out``.

    ``config``: a :class:`ShardConfig`, a dict of the same shape, or a .toml/.json file;
    ``overrides``: :class:`ShardConfig` fields (``tokenizer="causal3d"``, ``frames=[17]``, ...) that
    replace the config's. Re-running with the same ``out`` skips clips already in finished shards;
    ``retry_failed`` (``"all"``, a cause or a reason kind) runs failed clips again; ``redo_changed``
    replaces the samples of clips changed in the clip table since they were sharded.
    """
    if isinstance(config, (str, Path)):
        config = ShardConfig.load(config)
    elif isinstance(config, dict):
        config = ShardConfig.from_dict(config)
    config = config or ShardConfig()
    names = {f.name for f in fields(ShardConfig)} - {"execution"}
    unknown = set(overrides) - names
    if unknown:
        raise TypeError(f"shard(): unknown option(s) {', '.join(sorted(unknown))}; accepted: {', '.join(sorted(names))}")
    config = replace(config, **{k: v for k, v in overrides.items() if v is not None})
    return run_sharding(clips_dir, out, config, progress=progress, retry_failed=retry_failed, redo_changed=redo_changed)
