"""Folders written whole: a new hidden sibling folder is filled, then renamed into the final name, so a
reader (or a resumed run) never finds a folder holding part of one attempt and part of another."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def written_whole(out: str | os.PathLike) -> Iterator[Path]:
    """A new folder named as ``out`` for the block to write into, in a hidden sibling folder of ``out``
    (``.<out>.writing-<random>/<out>``: the block sees the name it writes, e.g. ``step_00000004``); when the
    block ends it takes ``out``'s place (a folder there is removed after the rename), when the block raises
    it is removed and ``out`` is as it was. Beside ``out``, so the rename stays on one file system."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    aside = _new_sibling(out, "writing")
    target = aside / out.name
    try:
        target.mkdir()
        yield target
    except BaseException:
        shutil.rmtree(aside, ignore_errors=True)
        raise
    old = None
    if out.exists() or out.is_symlink():
        # a folder cannot be renamed over a non-empty one: the earlier one steps aside first (a link at
        # ``out`` steps aside as the link: what it points to is never touched)
        old = _new_sibling(out, "replaced")
        out.rename(old / out.name)
    target.rename(out)
    aside.rmdir()
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def remove_leftover_folders(out: str | os.PathLike) -> list[Path]:
    """Remove the sibling folders :func:`written_whole` left for ``out`` when its process was killed
    (``.<out>.writing-*``, ``.<out>.replaced-*``); real folders only, never a link. For a writer that owns
    the parent folder (a run holding its folder's lock): another writer's folder in progress looks the same."""
    out = Path(out)
    pattern = re.compile(rf"\.{re.escape(out.name)}\.(writing|replaced)-[0-9a-f]{{8}}")
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(out.parent):
            if pattern.fullmatch(entry.name) and stat.S_ISDIR(entry.stat(follow_symlinks=False).st_mode):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(Path(entry.path))
    return removed


def _new_sibling(out: Path, what: str) -> Path:
    """A new hidden folder beside ``out``, made with the usual permissions (mkdtemp's are 0700, which the
    folder would keep after the rename)."""
    while True:
        folder = out.parent / f".{out.name}.{what}-{secrets.token_hex(4)}"
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
