"""The clip files of a video the folder forgot, deleted at the end of a run. A video moved and
clipped again at its new path replaces its old record (:func:`vfm_curator.io.state.forget_video`),
and the write stage deletes the old clips after the new record; a run killed between those steps
leaves the old clips in ``clips/`` with nothing naming them. The moved marker lists them, so the
next run (holding the folder's lock) deletes exactly those: never a file it cannot tell is such a
clip (one a user put there, one of a video whose record or part cannot be read this run)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from vfm_curator.io import state
from vfm_curator.io.paths import atomic_write, output_path, read_text_if_file, safe_join
from vfm_plugins import json_data
from vfm_plugins.files import remove_leftover


def remove_forgotten_clips(out: str | os.PathLike, named: set[str], thumbs_named: Iterable[str] = ()) -> list[str]:
    """Delete ``clips/<id>.mp4`` for every id a moved marker lists (the clips of the video it
    forgot) that ``named`` (the ids of the table just merged) does not, and its ``thumbs/<id>.jpg``
    unless ``thumbs_named`` keeps it (a filtered clip's thumbnail, shown in the report). A video
    with a record again (moved back, clipped again) keeps its clips. The list is dropped from the
    marker once done. Returns the ids deleted; only regular files, the names never resolved."""
    try:
        folder = safe_join(out, state.STATE, "moved")
    except ValueError:  # .state/moved is a link out of the folder: not ours to read
        return []
    if not folder.is_dir():
        return []
    keep_thumbs = set(thumbs_named)
    removed = []
    for vid in sorted(os.listdir(folder)):
        marker = _marker(out, vid)
        if marker is None or "clips" not in marker:
            continue
        listed = marker.pop("clips")
        if not state.was_recurated(out, vid) and isinstance(listed, list):
            for cid in sorted(c for c in listed if isinstance(c, str) and state.VIDEO_ID.fullmatch(c) and c not in named):
                if remove_leftover(output_path(out, "clips", f"{cid}.mp4")):
                    removed.append(cid)
                    if cid not in keep_thumbs:
                        remove_leftover(output_path(out, "thumbs", f"{cid}.jpg"))
        atomic_write(output_path(out, state.STATE, "moved", vid), json.dumps(marker).encode())
    return removed


def _marker(out: str | os.PathLike, vid: str) -> dict | None:
    if not state.VIDEO_ID.fullmatch(vid):
        return None
    try:
        marker = json_data.loads(read_text_if_file(safe_join(out, state.STATE, "moved", vid)))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None
