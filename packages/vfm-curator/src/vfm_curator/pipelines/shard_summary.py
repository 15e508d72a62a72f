"""What a sharding run did (:class:`ShardSummary`, ``SHARDS/summary.json``), with the tally of how
the clips written were fitted to their buckets and the warnings it gives."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vfm_plugins.text import counted

from vfm_curator.pipelines.shard_config import ShardConfig
from vfm_curator.pipelines.summary import FailureReport
from vfm_curator.stages.shard_task import ShardTask


@dataclass
class ShardSummary(FailureReport):
    """What a run did. ``samples``, ``tokens``, ``bytes`` and ``buckets`` describe the whole output."""

    out: str
    clips: int = 0  # rows in the clip table
    clips_dir: str = ""  # the vfm curate folder read
    curation_failures: dict[str, int] = field(default_factory=dict)  # with no clips: its failures.jsonl, kind -> videos
    skipped: int = 0  # already in finished shards
    topped_up: int = 0  # already in finished shards, given the windows a raised ``windows`` adds
    failed_before: int = 0  # failed in an earlier run and not run again (see vfm_curator.failures)
    retried: int = 0  # failed before and run again this time
    tried: int = 0  # clips this run set out to do (new ones and the failed ones run again)
    processed: int = 0  # run through the stages this time
    written: int = 0  # clips written this time
    samples_written: int = 0  # samples written this time (a clip gives one per window)
    cut_short: int = 0  # clips written or topped up this time with fewer windows than they fill (windows = 0's frame cap)
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
    notices: list[str] = field(default_factory=list)  # warnings about the fitting (see _resize_notices, _cut_short_notice)
    stage_seconds: dict[str, float] = field(default_factory=dict)  # worker seconds per stage this run (+ the driver's write)
    # clips of the table changed since they were sharded / sharded clips no longer in it (kept as they were)
    changed_since: int = 0
    removed_since: int = 0
    resharded: int = 0  # changed clips whose old samples were taken out to shard them again (redo_changed)
    samples_dropped: int = 0  # samples taken out of the shards (redo_changed: changed and removed clips)
    # the held-out split (val_fraction: the share of source videos asked for), of the whole output
    val_fraction: float = 0.0
    val_clips: int = 0
    val_samples: int = 0
    train_clips: int = 0
    # split keys of the clips in each split: source videos by content (byte-identical copies count once); a clip
    # whose video has no fingerprint counts by its video_id, one without a video_id by itself (split_key_fallbacks)
    val_videos: int = 0
    train_videos: int = 0
    split_key_fallbacks: dict[str, int] = field(default_factory=dict)  # val_fraction > 0: clips keyed by video_id / clip_id

    def problem(self) -> str | None:
        """One line when the run left nothing to train on: the shards hold no sample, or none of
        the clips this run tried was written. ``vfm shard`` exits non-zero with it."""
        if not self.clips:
            return "no sample written: the clip table lists no clips" + self._why_no_clips()
        if self.samples and not (self.tried and not self.written):
            return None
        what = "no sample written" if not self.samples else f"none of the {self.tried} clips tried was written"
        top = self.top_failure()
        if top is None:
            return f"{what}; see {Path(self.out) / 'failures.jsonl'}"
        kind, f = top
        return f"{what}: {f['count']} of {self.clips} clips failed ({kind}): {f['reason']}"

    def _why_no_clips(self) -> str:
        """Where an empty clip table comes from when its curation failed every video: how many failed
        and which files say why (the user ran vfm shard, so they may never have read curate's report)."""
        if not self.curation_failures:
            return ""
        kinds = ", ".join(f"{kind} {n}" for kind, n in self.curation_failures.items())
        n = sum(self.curation_failures.values())
        where = [Path(self.clips_dir) / name for name in ("failures.jsonl", "report.html")]
        return (f": vfm curate gave none, {n} of its videos failed ({kinds}); "
                f"why: {', '.join(str(p) for p in where if p.is_file())}")

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


def _changed_notice(summary: ShardSummary) -> list[str]:
    """One line when the shards hold samples of clips that changed in the clip table since they
    were sharded, or that it no longer lists (:mod:`vfm_curator.pipelines.shard_changes`)."""
    parts = []
    if summary.changed_since:
        parts.append(f"{summary.changed_since} clip{'s' if summary.changed_since != 1 else ''} changed in the clip table "
                     "since sharded (re-curated or recaptioned)")
    if summary.removed_since:
        parts.append(f"{summary.removed_since} sharded clip{'s' if summary.removed_since != 1 else ''} no longer in it "
                     "(re-cut, deduplicated or dropped)")
    if not parts:
        return []
    return [f"the shards hold old samples: {' and '.join(parts)}; they were kept as they were: re-run with "
            "--redo-changed to take them out and shard the changed clips again, or shard into a new folder"]


def _cut_short_notice(summary: ShardSummary) -> list[str]:
    """One line when ``windows = 0`` left out windows of long clips (its per-clip frame cap)."""
    from vfm_curator.stages.shard_decode import ALL_WINDOWS_BYTES

    if not summary.cut_short:
        return []
    return [f"{summary.cut_short} of the {summary.written + summary.topped_up} clips written now filled more windows than "
            f"they got: windows = 0 keeps at most {ALL_WINDOWS_BYTES / 2**20:g} MiB of frames per clip; set windows "
            "(--windows N) to take N windows of every clip, or cut shorter clips (vfm curate's split max_clip_s)"]


def _val_notice(summary: ShardSummary) -> list[str]:
    """One line when ``val_fraction`` asked for held-out clips and a split got none: too few source
    videos for the fraction (the split is by video, so a few videos may all fall on one side, and a
    single video's clips always do)."""
    if not summary.val_fraction or not summary.samples:
        return []
    total, videos = summary.val_clips + summary.train_clips, summary.val_videos + summary.train_videos
    why = (f"all {total} sharded clips come from {counted(videos, 'video')}; the split is by video (every clip "
           "of a source video in one split, so held-out clips share no scene with trained ones)")
    if not summary.val_clips:
        return [f"val_fraction {summary.val_fraction:g} put none of the {total} sharded clips in the val split: {why}, "
                f"about {summary.val_fraction * videos:.1f} video{'s' * (summary.val_fraction * videos != 1)} expected "
                "in val; vfm train's [validation] on split \"val\" has no clip to read; shard clips of more videos, or "
                "shard into a new folder with a larger --val-fraction, or name held-out shards in validation.blend"]
    if not summary.train_clips:
        return [f"val_fraction {summary.val_fraction:g} put all {total} sharded clips in the val split: {why}; the "
                "train split is empty and vfm train has nothing to train on; shard clips of more videos, or shard "
                "into a new folder with a smaller --val-fraction"]
    return []
