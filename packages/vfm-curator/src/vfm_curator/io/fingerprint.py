"""What an input was when it was clipped: so a re-run tells a video replaced at its path, or given
another caption, from the one it clipped, and the same video at a new path from a new one.

A video's id is its path (:func:`vfm_curator.tasks.video_id`), so a re-run alone would skip a file
replaced in place (its clips silently of the old one) and clip a moved folder again (every clip
twice in the table). The record of each finished video keeps ``input``: the file's size and
modification time (a cheap stat on every re-run), a fingerprint of its bytes (read only when the
stat differs, or for a path the folder has no record of), and a digest of its caption.

The fingerprint hashes the size and three 64 KiB samples (start, middle, end): containers put
their index at one end and the streams' bytes in between, so a re-encode, a trim or an edit moves
at least one sample, while reading it costs three seeks, not the whole file.
"""

from __future__ import annotations

import hashlib
import os
import re

from vfm_plugins.files import open_regular

SAMPLE = 64 * 1024
#: What :func:`fingerprint` returns (32 hex digits): a name read back from the folder that is not this is none of ours.
FORMAT = re.compile(r"[0-9a-f]{32}")


def fingerprint(path: str) -> str | None:
    """A digest of the file's size and three 64 KiB samples; None when it cannot be read or is no regular file."""
    try:
        # open_regular: a named pipe (an input a manifest names) is not waited on (it hung the run before any
        # stage), and it is no video file; an input that is a link to a video is one (follow_links)
        fd = open_regular(path, follow_links=True)
        with open(fd, "rb") as fh:
            size = os.fstat(fd).st_size
            digest = hashlib.sha256(str(size).encode("ascii"))
            for offset in sorted({0, max(0, size // 2 - SAMPLE // 2), max(0, size - SAMPLE)}):
                fh.seek(offset)
                digest.update(fh.read(SAMPLE))
    except (OSError, ValueError):
        return None
    return digest.hexdigest()[:32]


def caption_digest(caption: str | None) -> str | None:
    """A short digest of a caption (None: no caption), so records do not repeat the text."""
    return None if caption is None else hashlib.sha256(caption.encode("utf-8", "surrogateescape")).hexdigest()[:16]
