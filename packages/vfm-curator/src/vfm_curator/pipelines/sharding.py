"""The sharding pipeline: curated clips -> per-bucket WebDataset shards, energon metadata, a blend file.

``shard_decode -> shard_tokenize -> shard_text`` run on Ray with the auto-balancer (or in process),
the same runners as the clipping pipeline; the driver writes each finished sample into its bucket's
vfm-data shard writer (see :mod:`vfm_curator.pipelines.shard_files`). Output::

    SHARDS/<H>x<W>x<T>/shard-000000.tar ... + .nv-meta/   one energon dataset per bucket
    SHARDS/blend.yaml      energon metadataset listing every bucket, weight = its sample count
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
import json
import math
import re
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable

from vfm_curator.config import CurateConfig
from vfm_curator.execution.spec import StageSpec
from vfm_curator.failures import check_retry, options_hash, should_retry
from vfm_curator.io.paths import atomic_write, check_not_other_output, check_out_folder, disk_full, safe_join
from vfm_curator.pipelines import shard_index, shard_state
from vfm_curator.pipelines.summary import FailureReport, Progress
from vfm_curator.pipelines.shard_files import BucketWriters, bucket_dirs, finished_keys, remove_leftovers, shards
from vfm_curator.stages.shard_decode import Bucket, check_buckets
from vfm_curator.stages.shard_task import ShardTask
from vfm_plugins import FolderLock

SHARD_STAGES = ("shard_decode", "shard_tokenize", "shard_text")
#: What a sample's latent and text depend on: a folder is only resumed with the same values.
IDENTITY = ("tokenizer", "tokenizer_options", "text_encoder", "text_encoder_options", "seed", "array_format", "latent_dtype")
#: Which bucket a clip goes to and how it is fitted: a re-run may change them, but clips sharded
#: before stay where they are, which the run says (see _bucketing_notice).
BUCKETING = ("resolutions", "frames", "frame_stride", "max_upscale", "max_crop")


@dataclass
class ShardConfig:
    """Options of a sharding run. ``--config FILE`` (TOML or JSON)::

        [shard]
        tokenizer = "causal3d"
        text_encoder = "hash"
        resolutions = [[256, 256], [192, 320]]   # (H, W) buckets, by aspect ratio
        frames = [17, 9]                          # video frame counts (images are always 1)
        max_upscale = 2.0                         # refuse clips a bucket would enlarge more (default: no limit)
        max_crop = 0.3                            # refuse clips whose centre crop cuts more of the frame
        [shard.tokenizer_options]
        weights = "causal3d.safetensors"
        [run]                                      # as for vfm curate
        runner = "ray"

    ``stages`` and ``[options.<stage>]`` work as in the clipping config; the ``[shard]`` values
    above are handed to every stage that accepts an option of the same name.
    """

    tokenizer: str = "pixel"
    text_encoder: str = "hash"
    tokenizer_options: dict[str, Any] = field(default_factory=dict)
    text_encoder_options: dict[str, Any] = field(default_factory=dict)
    resolutions: list[list[int]] = field(default_factory=lambda: [[256, 256]])
    frames: list[int] = field(default_factory=lambda: [17])
    frame_stride: int = 1
    max_upscale: float | None = None  # refuse a clip its bucket would enlarge more than this (None: any)
    max_crop: float | None = None  # refuse a clip whose centre crop cuts more of its frame than this (None: any)
    require_captions: bool = True
    max_shard_bytes: int = 1 << 30
    array_format: str = "npy"
    latent_dtype: str = "float32"
    patch_size: int = 1  # only for the token counts of the summary (the model's patch)
    temporal_patch: int = 1
    seed: int = 0  # torch seed before building the tokenizer / text encoder (random-init models)
    device: str = "cpu"
    execution: CurateConfig = field(default_factory=lambda: CurateConfig(stages=list(SHARD_STAGES)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ShardConfig":
        data = dict(data)
        shard = dict(data.pop("shard", {}))
        names = {f.name for f in fields(cls)} - {"execution"}
        unknown = set(shard) - names
        if unknown:
            raise ValueError(f"config [shard]: unknown key(s) {', '.join(sorted(unknown))}; accepted: {', '.join(sorted(names))}")
        execution = CurateConfig.from_dict(data)
        if "stages" not in data:
            execution.stages = list(SHARD_STAGES)
        return cls(execution=execution, **shard)

    @classmethod
    def load(cls, path: str | Path) -> "ShardConfig":
        from vfm_curator.config import read_config_file

        return cls.from_dict(read_config_file(path))

    def identity(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in IDENTITY}

    def stage_specs(self) -> list[StageSpec]:
        """The configured stages, each given the ``[shard]`` values it has an option for."""
        from vfm_curator.plugins import host

        self.execution.check()
        shared = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "execution"}
        specs = []
        for name in self.execution.stages:
            cls = host.get("stages", name)
            options = {**{k: v for k, v in shared.items() if k in cls.defaults}, **self.execution.stage_options(name)}
            stage = cls(**options)  # validate now, in the driver, with a clear error
            # a model on CUDA asks Ray for its GPU share (a worker that declares none sees no GPU)
            specs.append(StageSpec(cls, options, getattr(stage, "configured_resources", None)))
        return specs


@dataclass
class ShardSummary(FailureReport):
    """What a run did. ``samples``, ``tokens``, ``bytes`` and ``buckets`` describe the whole output."""

    out: str
    clips: int = 0  # rows in the clip table
    skipped: int = 0  # already in finished shards
    failed_before: int = 0  # failed in an earlier run and not run again (see vfm_curator.failures)
    retried: int = 0  # failed before and run again this time
    tried: int = 0  # clips this run set out to do (new ones and the failed ones run again)
    processed: int = 0  # run through the stages this time
    written: int = 0  # samples written this time
    failures: int = 0  # failed clips of the table (this run's and earlier ones not retried)
    failure_kinds: dict[str, dict[str, Any]] = field(default_factory=dict)  # kind -> {count, reason (the first), cause}
    reindexed: list[str] = field(default_factory=list)  # buckets whose energon index was (re)built
    samples: int = 0
    tokens: int = 0  # patch tokens at (temporal_patch, patch_size, patch_size)
    bytes: int = 0  # of all shards
    wall_s: float = 0.0
    throughput: float = 0.0  # samples written per wall second, this run
    buckets: dict[str, dict[str, Any]] = field(default_factory=dict)
    blend: str = ""
    workers: dict[str, int] = field(default_factory=dict)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    # how the clips written this run were fitted to their buckets (scaled to cover, centre-cropped)
    upscaled: int = 0  # enlarged (clip smaller than its bucket)
    most_upscale: float = 1.0  # the largest factor, and which clip: "source HxW -> bucket"
    most_upscaled: str = ""
    cropped: int = 0  # the centre crop cut more than CROP_COUNTED of the frame
    most_crop: float = 0.0
    most_cropped: str = ""
    notices: list[str] = field(default_factory=list)  # warnings about the fitting (see _resize_notices)
    stage_seconds: dict[str, float] = field(default_factory=dict)  # worker seconds per stage this run (+ the driver's write)

    def problem(self) -> str | None:
        """One line when the run left nothing to train on: the shards hold no sample, or none of
        the clips this run tried was written. ``vfm shard`` exits non-zero with it."""
        if not self.clips:
            return "no sample written: the clip table lists no clips"
        if self.samples and not (self.tried and not self.written):
            return None
        what = "no sample written" if not self.samples else f"none of the {self.tried} clips tried was written"
        top = self.top_failure()
        if top is None:
            return f"{what}; see {Path(self.out) / 'failures.jsonl'}"
        kind, f = top
        return f"{what}: {f['count']} of {self.clips} clips failed ({kind}): {f['reason']}"

    def warning(self) -> str | None:
        """One line when most clips of the table failed for one reason (and :meth:`problem` is None)."""
        top = self.top_failure()
        if top is None or self.problem() is not None or 2 * top[1]["count"] <= self.clips:
            return None
        kind, f = top
        return f"{f['count']} of {self.clips} clips failed ({kind}): {f['reason']}; see {Path(self.out) / 'failures.jsonl'}"


#: A crop below this part of the frame (rounding to whole pixels) is not counted as cropping.
CROP_COUNTED = 0.01
#: Without max_upscale / max_crop, fitting beyond these is worth a warning.
UPSCALE_NOTICE, CROP_NOTICE = 2.0, 0.25


def _count_resize(summary: ShardSummary, task: ShardTask) -> None:
    """Tally how a written clip was fitted to its bucket."""
    what = f"{Path(task.source or task.path).name}, {task.size[0]}x{task.size[1]} (HxW) -> bucket {task.bucket}"
    if task.upscale > 1.0 + 1e-9:
        summary.upscaled += 1
        if task.upscale > summary.most_upscale:
            summary.most_upscale, summary.most_upscaled = float(task.upscale), what
    if task.crop > CROP_COUNTED:
        summary.cropped += 1
        if task.crop > summary.most_crop:
            summary.most_crop, summary.most_cropped = float(task.crop), what


def _resize_notices(summary: ShardSummary, config: ShardConfig) -> list[str]:
    """One line each when clips written this run were enlarged or cropped a lot and no limit says
    the user chose that."""
    notes = []
    if config.max_upscale is None and summary.most_upscale > UPSCALE_NOTICE:
        notes.append(f"{summary.upscaled} of the {summary.written} clips written now were upscaled to fill their bucket, "
                     f"up to {summary.most_upscale:.1f}x ({summary.most_upscaled}); add smaller resolutions, or set "
                     "max_upscale (--max-upscale) to refuse such clips")
    if config.max_crop is None and summary.most_crop > CROP_NOTICE:
        notes.append(f"{summary.cropped} of the {summary.written} clips written now were centre-cropped to their bucket's "
                     f"aspect ratio, cutting up to {summary.most_crop:.0%} of the frame ({summary.most_cropped}); add "
                     "resolutions near their aspect ratio (--resolution HxW), or set max_crop (--max-crop) to refuse such clips")
    return notes


#: The reason a clip without a caption fails when captions are required.
NO_CAPTION = ("no caption, and captions are required: caption the clips (vfm curate with a captioner, or <video>.txt "
              "sidecars) or shard them unconditional with --no-require-captions ([shard] require_captions = false)")


def read_clip_table(clips_dir: Path) -> list[ShardTask]:
    """One task per row of ``clips_dir/clips.parquet`` (``vfm curate``'s output); a row's ``path``
    is relative to ``clips_dir`` and may name an image file (a 1-frame sample)."""
    import pyarrow.parquet as pq

    table_path = clips_dir / "clips.parquet"
    if not clips_dir.exists():
        raise ValueError(f"{clips_dir} does not exist; expected the output folder of `vfm curate` (clips/ + clips.parquet)")
    if not table_path.is_file():
        raise ValueError(f"{clips_dir} has no clips.parquet; expected the output folder of `vfm curate`")
    try:
        rows = pq.read_table(table_path).to_pylist()
    except Exception as exc:  # pyarrow raises several types for a broken file
        raise ValueError(f"cannot read {table_path} as a parquet table: {exc}") from exc
    tasks = []
    for i, row in enumerate(rows):
        if not row.get("id") or not row.get("path"):
            raise ValueError(f"{table_path}: a row lacks 'id' or 'path' ({ {k: row.get(k) for k in ('id', 'path')} })")
        tasks.append(_task(table_path, i, row, clips_dir))
    return tasks


#: A clip id is a sample key in the shards and a file name under .state/ (vfm_data.writer's rule).
_CLIP_ID = re.compile(r"^[A-Za-z0-9_\-]+$")


def _task(table_path: Path, i: int, row: dict, clips_dir: Path) -> ShardTask:
    """Row ``i`` of the clip table as a task; a table is data from elsewhere, so a row vfm curate never
    writes (an id that is no sample key, a path leaving the folder, a non-finite number) refuses the
    whole table naming the row and what is accepted, before any clip is worked on (such a row stopped
    the run mid-way, dropping the open shards)."""
    where = f"{table_path} row {i} (id {row['id']!r})"
    if not isinstance(row["id"], str) or not _CLIP_ID.match(row["id"]):
        raise ValueError(f"{where}: the id is not a sample key; accepted: letters, digits, '_' and '-' (no dots or slashes)")
    try:
        path = safe_join(clips_dir, str(row["path"]))
    except ValueError:
        raise ValueError(f"{where}: path {row['path']!r} leaves the clips folder {clips_dir} (links followed); accepted: "
                         "a clip file inside it, relative to it") from None
    numbers = {k: float(row.get(k) or 0.0) for k in ("fps", "start_s", "end_s")}
    bad = [f"{k} = {v}" for k, v in numbers.items() if not math.isfinite(v) or v < 0]
    if bad:
        raise ValueError(f"{where}: {', '.join(bad)}; accepted: finite numbers >= 0")
    return ShardTask(
        id=row["id"], path=str(path), source=row.get("source") or "",
        caption=row.get("caption") or None, caption_by=dict(row.get("caption_by") or []),
        fps=numbers["fps"], span=(numbers["start_s"], numbers["end_s"]),
    )


def run_sharding(clips_dir: str | Path, out: str | Path, config: ShardConfig | None = None, *,
                 progress: Progress | None = None, retry_failed: str | None = None) -> ShardSummary:
    """Check the options and folders, then hold ``out``'s lock for the whole run: a second run into
    it fails with ``FolderLockedError`` naming this one, before it reads or deletes anything.
    ``retry_failed``: ``"all"``, a cause or a reason kind of failed clips to run again."""
    out = Path(out).resolve()
    config = config or ShardConfig()
    retry = check_retry(retry_failed)
    check_out_folder(out)
    check_not_other_output(out, "vfm shard")
    clips_dir = Path(clips_dir).resolve()
    specs = config.stage_specs()
    try:
        with FolderLock(out):
            return _run_sharding(clips_dir, out, config, specs, progress=progress, retry=retry)
    except OSError as exc:  # the lock file, a shard, an index...: a full disk is one line wherever it shows
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise disk_full(out) from exc
        raise


def _run_sharding(clips_dir: Path, out: Path, config: ShardConfig, specs: list[StageSpec], *,
                  progress: Progress | None, retry: str | None) -> ShardSummary:
    tokenizer = _check_buckets(config)
    tasks = read_clip_table(clips_dir)
    out.mkdir(parents=True, exist_ok=True)
    _check_identity(out, config)
    remove_leftovers(out)  # we hold the lock and have written nothing: every temporary shard is a dead run's
    done = set().union(*finished_keys(out).values())
    hashes = _options_hashes(specs, config)
    summary = ShardSummary(out=str(out), clips=len(tasks))
    todo = []
    for task in tasks:
        if task.id in done:
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
    if todo:
        _execute(todo, specs, config, out, summary, hashes, progress)
    summary.wall_s = time.perf_counter() - t0
    summary.throughput = summary.written / summary.wall_s if summary.wall_s > 0 else 0.0
    summary.notices = _resize_notices(summary, config) + _bucketing_notice(out, config, summary.skipped)
    _finalize(out, summary, {t.id for t in tasks}, lambda b: _tokens_per_sample(tokenizer, b, config))
    return summary


def _options_hashes(specs: list[StageSpec], config: ShardConfig) -> dict[str, str]:
    """stage -> hash of the options up to it (``"*"``: all; ``"caption"``: require_captions)."""
    pairs = [(s.name, s.options) for s in specs]
    return {"*": options_hash(pairs, ""), "caption": options_hash([("caption", {"require_captions": config.require_captions})], "caption"),
            **{name: options_hash(pairs, name) for name, _ in pairs}}


def _check_buckets(config: ShardConfig):
    """Check every bucket shape against the tokenizer (clear errors before any work); returns the
    tokenizer, which :func:`_tokens_per_sample` then uses for the summary."""
    import vfm_models

    from vfm_curator.stages.shard_tokenize import build_tokenizer

    check_buckets(config.resolutions, config.frames, config.frame_stride)
    vfm_models.get_text_encoder(config.text_encoder)  # an unknown name lists the available ones
    tokenizer = build_tokenizer(config.tokenizer, config.tokenizer_options, config.seed)
    for h, w in config.resolutions:
        for t in [1, *config.frames]:
            _tokens_per_sample(tokenizer, Bucket(int(h), int(w), int(t)), config)
    return tokenizer


def _tokens_per_sample(tokenizer, bucket: Bucket, config: ShardConfig) -> int:
    from vfm_data.packing import patch_grid

    try:
        shape = tokenizer.latent_shape((3, bucket.frames, bucket.height, bucket.width))
    except ValueError as exc:
        raise ValueError(f"bucket {bucket.name} (H x W x frames) does not fit tokenizer {config.tokenizer!r}: {exc}") from exc
    grid = patch_grid(tuple(shape), config.patch_size, config.temporal_patch)
    return grid[0] * grid[1] * grid[2]


def _check_identity(out: Path, config: ShardConfig) -> None:
    path = safe_join(out, "shard_config.json")
    mine = json.loads(json.dumps(config.identity()))
    if path.exists():
        theirs = json.loads(path.read_text(encoding="utf-8"))
        diff = sorted(k for k in IDENTITY if theirs.get(k) != mine[k])
        if diff:
            raise ValueError(
                f"{out} holds shards made with other settings ({', '.join(f'{k}: {theirs.get(k)!r} there, {mine[k]!r} now' for k in diff)}); "
                "use the same settings to resume, or a new output folder"
            )
    else:
        atomic_write(path, json.dumps(mine, indent=2, sort_keys=True).encode("utf-8"))


def _bucketing_notice(out: Path, config: ShardConfig, kept: int) -> list[str]:
    """A line when this run's bucket options differ from the last run's into ``out`` while clips
    sharded then are kept (they are not re-bucketed); records this run's options for the next."""
    path = safe_join(out, shard_state.STATE, "bucketing.json")
    mine = json.loads(json.dumps({k: getattr(config, k) for k in BUCKETING}))
    try:
        theirs = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        theirs = None
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(mine, sort_keys=True).encode("utf-8"))
    diff = [k for k in BUCKETING if isinstance(theirs, dict) and theirs.get(k) != mine[k]]
    if not diff or not kept:
        return []
    return [f"{', '.join(f'{k} {theirs.get(k)!r} -> {mine[k]!r}' for k in diff)} since the last run into this folder: the "
            f"{kept} clips sharded before keep their buckets and fitting (only new and failed clips use the new options); "
            "shard into a new folder to re-bucket them all"]


def _execute(todo: list[ShardTask], specs: list[StageSpec], config: ShardConfig, out: Path, summary: ShardSummary,
             hashes: dict[str, str], progress: Progress | None) -> None:
    from vfm_curator.execution.runner import open_runner

    def advance(stage: str, n: int) -> None:
        if progress is not None:
            progress.advance(stage, n)

    with open_runner(specs, config.execution, out, advance) as runner:
        writers = BucketWriters(out, max_shard_bytes=config.max_shard_bytes, array_format=config.array_format,
                                latent_dtype=config.latent_dtype, tokenizer=config.tokenizer, text_encoder=config.text_encoder,
                                extra={"tokenizer_options": config.tokenizer_options, "text_encoder_options": config.text_encoder_options})
        if progress is not None:
            progress.start([s.name for s in specs] + ["write"], len(todo))
        try:
            for task in runner.run(iter(todo)):
                summary.processed += 1
                for stage, seconds in task.timings.items():
                    summary.stage_seconds[stage] = summary.stage_seconds.get(stage, 0.0) + seconds
                t_write = time.perf_counter()
                if task.failure is None and (task.latent is None or task.text is None):
                    task.fail("write", f"no {'latent' if task.latent is None else 'text embedding'} after the last stage")
                if task.failure is not None:
                    shard_state.write_failure(out, task, hashes.get(task.failure["stage"], hashes["*"]))
                else:
                    writers.write(task)
                    shard_state.clear_failure(out, task.id)
                    summary.written += 1
                    _count_resize(summary, task)
                summary.stage_seconds["write"] = summary.stage_seconds.get("write", 0.0) + time.perf_counter() - t_write
                advance("write", 1)
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


def _finalize(out: Path, summary: ShardSummary, table_ids: set[str], tokens_per_sample: Callable[[Bucket], int]) -> None:
    """Energon index of every bucket whose index differs from its shards, bucket table, blend file,
    failures (of the clips in the table), summary."""
    from vfm_data import write_blend

    for folder in bucket_dirs(out):
        if shard_index.refresh(folder):
            summary.reindexed.append(folder.name)
    counts = finished_keys(out)
    for folder in bucket_dirs(out):
        if not counts.get(folder.name):
            continue
        b = Bucket.parse(folder.name)
        n, per = len(counts[folder.name]), tokens_per_sample(b)
        summary.buckets[folder.name] = {
            "height": b.height, "width": b.width, "frames": b.frames, "modality": "image" if b.frames == 1 else "video",
            "samples": n, "tokens_per_sample": per, "tokens": n * per,
            "shards": len(shards(folder)), "bytes": sum(s.stat().st_size for s in shards(folder)),
        }
    summary.samples = sum(b["samples"] for b in summary.buckets.values())
    summary.tokens = sum(b["tokens"] for b in summary.buckets.values())
    summary.bytes = sum(b["bytes"] for b in summary.buckets.values())
    failures = [f for f in shard_state.failures(out) if f.get("id") in table_ids and f.get("id") not in set().union(*counts.values())]
    summary.failures = len(failures)
    for f in failures:
        entry = summary.failure_kinds.setdefault(str(f.get("kind", "error")), {"count": 0, "reason": str(f.get("reason", "")),
                                                                               "cause": str(f.get("cause", "input"))})
        entry["count"] += 1
    if summary.buckets:
        blend = safe_join(out, "blend.yaml")
        write_blend(blend, [(safe_join(out, name), b["samples"]) for name, b in summary.buckets.items()])
        header = "".join(f"# bucket {name}: {b['samples']} samples, {b['tokens']} tokens\n" for name, b in summary.buckets.items())
        atomic_write(blend, (header + blend.read_text(encoding="utf-8")).encode("utf-8"))
        summary.blend = str(blend)
    atomic_write(safe_join(out, "buckets.json"), json.dumps(summary.buckets, indent=2).encode("utf-8"))
    keep = ("id", "path", "source", "stage", "reason", "cause", "kind", "attempts")
    lines = "".join(json.dumps({k: f[k] for k in keep if k in f}, sort_keys=True) + "\n" for f in failures)
    atomic_write(safe_join(out, "failures.jsonl"), lines.encode("utf-8"))
    atomic_write(safe_join(out, "summary.json"), json.dumps(summary.as_dict(), indent=2, default=str).encode("utf-8"))


def shard(clips_dir: str | Path, out: str | Path, config: ShardConfig | dict[str, Any] | str | Path | None = None, *,
          progress: Progress | None = None, retry_failed: str | None = None, **overrides: Any) -> ShardSummary:
    """Shard the curated clips of ``clips_dir`` (``vfm curate``'s output) into ``out``.

    ``config``: a :class:`ShardConfig`, a dict of the same shape, or a .toml/.json file;
    ``overrides``: :class:`ShardConfig` fields (``tokenizer="causal3d"``, ``frames=[17]``, ...) that
    replace the config's. Re-running with the same ``out`` skips clips already in finished shards;
    ``retry_failed`` (``"all"``, a cause or a reason kind) runs failed clips again.
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
    return run_sharding(clips_dir, out, config, progress=progress, retry_failed=retry_failed)
