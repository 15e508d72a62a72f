"""Clip files that no record names, deleted at the end of a run: a run killed between the write
stage's steps that replace a video's clips (forgetting a moved video's record, writing the new
record, deleting the old clip files) leaves the old clips in ``clips/`` with nothing naming them,
so the next run (holding the folder's lock) takes them away instead of keeping them for ever."""

from __future__ import annotations

import os
from collections.abc import Iterable

from vfm_curator.io.paths import output_path, safe_join
from vfm_plugins.files import remove_leftover


def remove_orphan_clips(out: str | os.PathLike, named: set[str], thumbs_named: Iterable[str] = ()) -> list[str]:
    """Delete ``clips/<id>.mp4`` for every id not in ``named`` (the clips of the folder's finished
    videos, before any review took some out of the table) and its ``thumbs/<id>.jpg`` unless
    ``thumbs_named`` keeps it (a filtered clip's thumbnail, shown in the report). Returns the ids
    deleted. Only regular files with a clip's name: staging files (dot-names), links planted there
    and anything else are left alone; the names are not resolved (a link is never followed)."""
    try:
        folder = safe_join(out, "clips")
    except ValueError:  # clips/ is a link out of the folder: not ours to clean
        return []
    if not folder.is_dir():
        return []
    keep_thumbs = set(thumbs_named)
    removed = []
    with os.scandir(folder) as entries:
        names = [e.name for e in entries]
    for name in sorted(names):
        stem, ext = os.path.splitext(name)
        if ext != ".mp4" or name.startswith(".") or stem in named:
            continue
        if remove_leftover(output_path(out, "clips", name)):
            removed.append(stem)
            if stem not in keep_thumbs:
                remove_leftover(output_path(out, "thumbs", f"{stem}.jpg"))
    return removed
