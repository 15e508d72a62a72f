"""The end of a sharding run: each bucket's energon index brought in line with its shards, then the
bucket table, blend file, failures and summary written from what the folder holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from vfm_curator.io.paths import atomic_write, output_path, safe_join
from vfm_curator.pipelines import shard_index, shard_state
from vfm_curator.pipelines.shard_changes import clip_of
from vfm_curator.pipelines.shard_files import both_splits, bucket_dirs, finished_split_keys, shards
from vfm_curator.pipelines.shard_split import TRAIN, VAL
from vfm_curator.pipelines.shard_summary import ShardSummary, _val_notice
from vfm_curator.stages.shard_decode import Bucket


def _finalize(out: Path, summary: ShardSummary, table_keys: dict[str, str], tokens_per_sample: Callable[[Bucket], int]) -> None:
    """Energon index of every bucket whose index differs from its shards, bucket table, blend file,
    failures (of the clips in the table), summary. ``table_keys``: clip id -> its split key (its source
    video's content, see :func:`.shard_split.split_key`) for the clips of the table."""
    from vfm_data import write_blend

    for folder in bucket_dirs(out):
        if shard_index.refresh(folder):
            summary.reindexed.append(folder.name)
    by_split = finished_split_keys(out)  # every finished shard read once, its split part known by its name
    counts = both_splits(by_split)
    val_keys = {bucket: parts[VAL] for bucket, parts in by_split.items()}
    for folder in bucket_dirs(out):
        if not counts.get(folder.name):
            continue
        b = Bucket.parse(folder.name)
        n, per, files = len(counts[folder.name]), tokens_per_sample(b), shards(folder)
        summary.buckets[folder.name] = {
            "height": b.height, "width": b.width, "frames": b.frames, "modality": "image" if b.frames == 1 else "video",
            "samples": n, "tokens_per_sample": per, "tokens": n * per,
            "shards": len(files), "bytes": sum(s.stat().st_size for s in files),
            "val_samples": len(val_keys[folder.name]),  # of samples: those in its val split part
        }
    summary.samples = sum(b["samples"] for b in summary.buckets.values())
    summary.val_samples = sum(len(keys) for keys in val_keys.values())
    val_clips = {clip_of(key) for keys in val_keys.values() for key in keys}
    train_clips = {clip_of(key) for keys in counts.values() for key in keys} - val_clips
    summary.val_clips, summary.train_clips = len(val_clips), len(train_clips)
    # source videos per split (a sharded clip the table no longer lists counts as its own)
    summary.val_videos = len({table_keys.get(c, c) for c in val_clips})
    summary.train_videos = len({table_keys.get(c, c) for c in train_clips})
    summary.tokens = sum(b["tokens"] for b in summary.buckets.values())
    summary.bytes = sum(b["bytes"] for b in summary.buckets.values())
    sharded = set().union(*counts.values())
    failures = [f for f in shard_state.failures(out) if f.get("id") in table_keys and f.get("id") not in sharded]
    summary.failures = len(failures)
    for f in failures:
        entry = summary.failure_kinds.setdefault(str(f.get("kind", "error")), {"count": 0, "reason": str(f.get("reason", "")),
                                                                               "cause": str(f.get("cause", "input"))})
        entry["count"] += 1
    if summary.buckets:
        blend = output_path(out, "blend.yaml")
        # one split part per split with samples, each bucket weighted by its samples there (energon
        # refuses an entry whose dataset lacks the split part)
        pairs = {split: [(safe_join(out, name), n) for name, b in summary.buckets.items()
                         if (n := b["val_samples"] if split == VAL else b["samples"] - b["val_samples"])]
                 for split in (TRAIN, VAL)}
        pairs = {split: p for split, p in pairs.items() if p}
        first = next(iter(pairs))
        write_blend(blend, pairs.pop(first), split_part=first, more_splits=pairs)
        header = "".join(f"# bucket {name}: {b['samples']} samples, {b['tokens']} tokens"
                         + (f" ({b['val_samples']} samples in val)" if b["val_samples"] else "") + "\n"
                         for name, b in summary.buckets.items())
        atomic_write(blend, (header + blend.read_text(encoding="utf-8")).encode("utf-8"))
        summary.blend = str(blend)
    atomic_write(output_path(out, "buckets.json"), json.dumps(summary.buckets, indent=2).encode("utf-8"))
    keep = ("id", "path", "source", "stage", "reason", "cause", "kind", "attempts")
    lines = "".join(json.dumps({k: f[k] for k in keep if k in f}, sort_keys=True) + "\n" for f in failures)
    atomic_write(output_path(out, "failures.jsonl"), lines.encode("utf-8"))
    summary.notices += _val_notice(summary)
    atomic_write(output_path(out, "summary.json"), json.dumps(summary.as_dict(), indent=2, default=str).encode("utf-8"))
