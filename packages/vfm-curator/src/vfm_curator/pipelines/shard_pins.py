"""Which split part each clip goes to in a shards folder (:class:`SplitPins`): the one its source video
already has there, else the one its split key gives (:func:`.shard_split.split_of`).

The split key follows the video's bytes (:func:`.shard_split.split_key`), so a video moved, renamed or
curated again elsewhere keeps its split; its ``video_id`` follows its path, so a video rewritten in
place (re-encoded, re-downloaded) keeps its id. A folder remembers both for every clip it wrote (the
ledger line of :func:`.shard_changes.note_sharded`), and a new clip of a video it knows by either goes
where that video's samples went: re-cut, rewritten or moved, a video never straddles train and val,
also after its old samples were taken out (``redo_changed``), which training may have read already.
Clips a folder holds whose ledger line has no split (written before it was kept) pin their video (the
line's source names it) by the shard they are in."""

from __future__ import annotations

from pathlib import Path

from vfm_curator.pipelines.shard_changes import clip_of, ledger_entries
from vfm_curator.pipelines.shard_split import PREFIXES, TRAIN, split_of
from vfm_curator.stages.shard_task import ShardTask
from vfm_curator.tasks import video_id


class SplitPins:
    """The split of each clip of a run into ``out`` (``by_split``: its finished sample keys per bucket and
    split part, ``tasks``: the clip table, split keys set); all train at fraction 0."""

    def __init__(self, out: Path, tasks: list[ShardTask], by_split: dict[str, dict[str, set[str]]], val_fraction: float) -> None:
        self.val_fraction = val_fraction
        self.by_video: dict[str, str] = {}
        self.by_key: dict[str, str] = {}
        if not val_fraction:
            return
        videos: dict[str, set[str]] = {}  # video id -> the split parts its clips are in
        keys: dict[str, set[str]] = {}  # split key -> the same

        def pin(sides: dict[str, set[str]], name: object, split: str) -> None:
            if isinstance(name, str) and name:
                sides.setdefault(name, set()).add(split)

        ledger = ledger_entries(out)
        for entry in ledger.values():  # every clip written since the split was kept, held or since taken out
            if entry.get("split") in PREFIXES:
                pin(videos, entry.get("video_id"), entry["split"])
                pin(keys, entry.get("split_key"), entry["split"])
        # the clips the shards hold, by the split part they are in: also those written before the
        # ledger kept splits (a ledger line's source names its video: vfm curate's id is its hash)
        table = {t.id: t for t in tasks}
        for bucket in by_split.values():
            for split, sample_keys in bucket.items():
                for clip in {clip_of(key) for key in sample_keys}:
                    entry, task = ledger.get(clip) or {}, table.get(clip)
                    source = entry.get("source")
                    video = entry.get("video_id") or (video_id(source) if isinstance(source, str) and source else None)
                    pin(videos, video or (task.video_id if task else None), split)
                    pin(keys, entry.get("split_key") or (task.split_key if task else None), split)
        # a video on both sides already (an older rule's folder) is pinned nowhere
        self.by_video = {name: split for name, (split, *more) in videos.items() if not more}
        self.by_key = {name: split for name, (split, *more) in keys.items() if not more}

    def of(self, task: ShardTask) -> str:
        """``"train"`` or ``"val"``: where ``task``'s video is in the folder (by its id, else its split
        key), else where its split key puts it."""
        if not self.val_fraction:
            return TRAIN
        return (self.by_video.get(task.video_id) if task.video_id else None) or self.by_key.get(task.split_key) \
            or split_of(task.split_key, self.val_fraction)
