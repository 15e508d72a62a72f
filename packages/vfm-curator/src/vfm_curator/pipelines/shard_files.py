"""Writing samples into per-bucket vfm-data shards, and reading back what finished shards hold.

The sharding pipeline's driver does this, not a Ray stage (so it lives beside the pipeline, not in
``stages/``): a shard stays open across many samples and must be closed (renamed to its final name)
exactly once, which one writer per bucket in one process does.
vfm-data's :class:`ShardWriter` writes under a hidden temporary name and renames a shard only when
it is complete, so the final names only ever hold complete shards; those are the resume state.
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

from vfm_curator.io.paths import safe_join
from vfm_curator.pipelines.shard_split import PREFIXES, split_key, split_of
from vfm_curator.stages.shard_task import ShardTask

# a finished shard of either split (train ``shard-N.tar``, val ``val-N.tar``, see shard_split)
_SHARD_RE = re.compile(rf"^({'|'.join(PREFIXES.values())})-(\d+)\.tar$")
_BUCKET_RE = re.compile(r"^\d+x\d+x\d+$")
LATENT_DTYPES = ("float32", "float16", "bfloat16")


def bucket_dirs(out: Path) -> list[Path]:
    """The bucket folders (``<H>x<W>x<T>``) of a shards folder."""
    return sorted(p for p in Path(out).iterdir() if p.is_dir() and _BUCKET_RE.match(p.name)) if Path(out).is_dir() else []


def shards(folder: Path) -> list[Path]:
    """Finished shards of one bucket folder, of both splits (train's first), in order."""
    return [p for split in PREFIXES for p in split_shards(folder, split)]


def split_shards(folder: Path, split: str) -> list[Path]:
    """Finished shards of one split part (``"train"``, ``"val"``) of a bucket folder, in order."""
    prefix = PREFIXES[split]
    return sorted(p for p in folder.glob(f"{prefix}-*.tar") if (m := _SHARD_RE.match(p.name)) and m.group(1) == prefix)


def shard_keys(shard: Path) -> set[str]:
    """Sample keys in a finished shard (tar member names up to the first dot)."""
    with tarfile.open(shard, "r") as tar:
        return {name.split(".", 1)[0] for name in tar.getnames()}


def finished_keys(out: Path) -> dict[str, set[str]]:
    """bucket name -> keys of the samples in its finished shards."""
    return both_splits(finished_split_keys(out))


def both_splits(by_split: dict[str, dict[str, set[str]]]) -> dict[str, set[str]]:
    """bucket name -> its sample keys in either split part, from :func:`finished_split_keys`'s answer."""
    return {bucket: set().union(*parts.values()) for bucket, parts in by_split.items()}


def finished_split_keys(out: Path) -> dict[str, dict[str, set[str]]]:
    """bucket name -> split part (``"train"``, ``"val"``) -> keys of the samples in its finished shards."""
    return {d.name: {split: set().union(*[shard_keys(s) for s in split_shards(d, split)]) for split in PREFIXES}
            for d in bucket_dirs(out)}


def remove_leftovers(out: Path) -> int:
    """Delete the temporary files of shards a killed run never finished (named by vfm-data's
    :func:`~vfm_data.writer.temporary_prefix`); returns how many. Only regular files: a link planted
    at such a name is neither followed nor removed."""
    from vfm_data.writer import temporary_prefix
    from vfm_plugins.files import remove_leftover

    removed = 0
    for folder in bucket_dirs(out):
        for prefix in PREFIXES.values():
            for tmp in folder.glob(temporary_prefix(f"{prefix}-*.tar") + "*"):
                removed += remove_leftover(tmp)
    return removed


class BucketWriters:
    """One vfm-data :class:`ShardWriter` per bucket folder and split part (``val_fraction``: which
    source videos' clips go to val, see :mod:`.shard_split`), opened on its first sample and numbered after the
    shards of that split earlier runs finished there."""

    def __init__(self, out: Path, *, max_shard_bytes: int, array_format: str = "npy", latent_dtype: str = "float32",
                 tokenizer: str, text_encoder: str, extra: dict | None = None, val_fraction: float = 0.0) -> None:
        if latent_dtype not in LATENT_DTYPES:
            raise ValueError(f"latent_dtype must be one of {', '.join(LATENT_DTYPES)}, got {latent_dtype!r}")
        if latent_dtype == "bfloat16" and array_format != "pth":
            raise ValueError("latent_dtype 'bfloat16' needs array_format 'pth' (npy has no bfloat16)")
        self.out = Path(out)
        self.max_shard_bytes, self.array_format, self.latent_dtype = max_shard_bytes, array_format, latent_dtype
        self.tokenizer, self.text_encoder, self.extra = tokenizer, text_encoder, dict(extra or {})
        self.val_fraction = val_fraction
        self.writers: dict[tuple[str, str], object] = {}
        self.written: dict[str, int] = {}

    def _writer(self, bucket: str, split: str):
        from vfm_data import ShardWriter

        if (bucket, split) not in self.writers:
            folder = safe_join(self.out, bucket)
            done = [int(_SHARD_RE.match(p.name).group(2)) for p in split_shards(folder, split)] if folder.is_dir() else []
            self.writers[bucket, split] = ShardWriter(folder, prefix=PREFIXES[split], max_shard_bytes=self.max_shard_bytes,
                                                      array_format=self.array_format, start_index=max(done, default=-1) + 1)
        return self.writers[bucket, split]

    def write(self, task: ShardTask, *, done: frozenset[str] | set[str] = frozenset(), split: str | None = None) -> int:
        """Write the clip's samples (one per window) and return how many. The first window, whose key
        is the clip id, goes last: once it is in a finished shard so are the others (a resumed run
        skips the clip by its id); a window already in a finished shard (``done``: the clip was cut
        short by an interruption) is not written twice. ``split``: the split part its samples go to
        (a clip topped up with more windows: where its first ones are); None: its split key's."""
        import torch

        from vfm_data import SampleMeta

        latents, text = task.latents(), torch.tensor(task.text)
        # by the source video's content: every clip of the video, and every window of the clip, in one split
        drawn_from = task.split_key or split_key(None, task.video_id, task.id)
        split = split or split_of(drawn_from, self.val_fraction)
        written = 0
        for k in reversed(range(len(latents))):
            key = task.sample_key(k)
            if key in done:
                continue
            meta = SampleMeta(
                source=task.source or task.path, span=task.window_span(k), fps=task.fps, size=task.size,
                caption=task.caption or "", modality=task.modality, tokenizer=self.tokenizer,
                text_encoder=self.text_encoder, text_length=int(task.text.shape[0]),
                # video_id and split_key: so that whoever reads the shards can check that no video
                # (no key) has samples in both splits; a reader that does not know them ignores them
                extra={"clip": task.id, **({"window": k} if len(latents) > 1 else {}), "bucket": task.bucket,
                       **({"video_id": task.video_id} if task.video_id else {}), "split_key": drawn_from,
                       "upscale": round(float(task.upscale), 4), "crop": round(float(task.crop), 4), **self.extra,
                       **({"caption_by": dict(task.caption_by)} if task.caption and task.caption_by else {})},
            )
            # arrays from Ray's object store are read-only: copy into tensors
            latent = torch.tensor(latents[k], dtype=getattr(torch, self.latent_dtype))
            self._writer(task.bucket, split).write(key, latent, text, meta)
            written += 1
        self.written[task.bucket] = self.written.get(task.bucket, 0) + written
        return written

    def close(self) -> None:
        """Finish every open shard."""
        for writer in self.writers.values():
            writer.close()

    def abort(self) -> None:
        """Drop every open (incomplete) shard; finished shards stay."""
        for writer in self.writers.values():
            writer.abort()
