"""The folders of a checkpoint root: which are committed checkpoints, and how a save's folder is made,
committed, and how old ones are removed, so that a kill at any moment leaves step N's checkpoint or
the one before it, and nothing another process planted under a name vfm uses is followed or stops a save.

Names under ``<root>``: ``step_<N>`` (committed), ``.tmp-step_<N>-<random>`` (a save being written;
``.tmp-step_<N>`` from earlier versions), ``.old-step_<N>-<random>`` (the previous copy of a step that is
being saved again, listed only while no ``step_<N>`` exists; ``.old-step_<N>`` from earlier versions).
Only real folders count: a link or a file at any of these names is never listed, followed or removed.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path

from vfm_plugins.files import SwappedFileError, current_umask

from vfm_parallel.checkpoint_integrity import MANIFEST
from vfm_parallel.checkpoint_names import ASIDE_DIR, STEP_DIR, folder_step, step_dir  # noqa: F401  (step_dir: interface)


def _is_real_dir(path: Path) -> bool:
    """A folder itself, not a link to one (lstat)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _manifest_time(folder: Path) -> float | None:
    """When the folder's manifest was written, or None when it has none (a regular file, not a link)."""
    try:
        found = os.lstat(folder / MANIFEST)
    except OSError:
        return None
    return found.st_mtime if stat.S_ISREG(found.st_mode) else None


def list_checkpoints(root: str | Path) -> list[Path]:
    """Checkpoint folders under ``root``, oldest first, one per step: ``step_<N>``, else (a re-save
    killed between its two renames) the aside copy ``.old-step_<N>-*`` holding a manifest (one whose
    removal began has none). Links and files at these names are not listed (and not followed)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found: dict[int, Path] = {}
    asides: dict[int, list[tuple[float, str, Path]]] = {}
    with os.scandir(root) as entries:
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            path = root / entry.name
            if m := STEP_DIR.match(entry.name):
                found[int(m.group(1))] = path
            elif (m := ASIDE_DIR.match(entry.name)) and (written := _manifest_time(path)) is not None:
                asides.setdefault(int(m.group(1)), []).append((written, entry.name, path))
    for step, copies in asides.items():
        found.setdefault(step, max(copies)[2])  # the most recently written copy
    return [found[k] for k in sorted(found)]


def latest(root: str | Path) -> Path | None:
    """The newest committed checkpoint under ``root``, or None."""
    found = list_checkpoints(root)
    return found[-1] if found else None


def _asides_of(root: Path, step: int) -> list[Path]:
    """The aside copies of ``step`` under ``root`` (real folders only)."""
    out = []
    for name in os.listdir(root):
        m = ASIDE_DIR.match(name)
        if m and int(m.group(1)) == step and _is_real_dir(root / name):
            out.append(root / name)
    return sorted(out)


def _discard(path: Path) -> None:
    """Remove a folder this module renamed or listed: its manifest first, so that a removal cut short
    leaves a folder that is no longer taken for a checkpoint; a link or file (what stood at
    ``step_<N>`` when it was renamed aside) is unlinked, never followed."""
    if not _is_real_dir(path):
        path.unlink(missing_ok=True)
        return
    (path / MANIFEST).unlink(missing_ok=True)
    shutil.rmtree(path)


def prune(root: Path, keep: int) -> None:
    """Remove the committed checkpoints beyond the newest ``keep``, each with its step's aside copies
    (left there, one would be listed as that step once its ``step_<N>`` is gone). Best effort: it never
    raises an OSError, since the save it follows is committed and its other ranks wait at a barrier
    for this one; what it could not list or remove is pruned by a later save."""
    try:
        old = list_checkpoints(root)[:-keep]
    except OSError:
        return
    for checkpoint in old:
        try:
            paths = dict.fromkeys([checkpoint, *_asides_of(root, folder_step(checkpoint))])
        except OSError:
            paths = dict.fromkeys([checkpoint])
        for path in paths:
            try:
                _discard(path)
            except OSError:
                pass  # listed, and pruned, again by a later save


class AfterRenameError(Exception):
    """The commit's rename was done, then something after it failed: ``final`` is in place (or, where
    another process swapped the folder, holds that one), so the save's error must not say that nothing
    of it was committed. ``str()`` says what failed, ``outcome`` what stands at ``final``, ``fix`` what to do."""

    def __init__(self, what: str, outcome: str, fix: str) -> None:
        super().__init__(what)
        self.outcome, self.fix = outcome, fix


def commit_folder(tmp: Path, final: Path, made: os.stat_result) -> None:
    """Rename ``tmp`` (the folder ``made`` describes) to ``final``. A committed ``final`` (a re-save of
    its step) is first renamed aside, to a new random ``.old-`` name, and deleted only after the new one
    is in and checked to be ``made``, so that the step always has a checkpoint. A failure after the
    rename raises :class:`AfterRenameError`."""
    root, step = final.parent, folder_step(final)
    aside = None
    if os.path.lexists(final):
        if _is_real_dir(final):  # else (a link or file there) an aside is what lists as this step
            for stale in _asides_of(root, step):  # earlier re-saves' copies: ``final`` is newer than any
                _discard(stale)
        # unpredictable, so nothing can wait there; a folder renamed onto a name that exists fails
        # (or replaces an empty folder): never into anything
        aside = root / f".old-{final.name}-{secrets.token_hex(6)}"
        os.rename(final, aside)
    os.rename(tmp, final)  # the commit
    kept = f"; the step's previous copy is kept as {aside.name}" if aside is not None else ""
    try:
        ours = same_folder(final, made)
    except OSError as exc:
        raise AfterRenameError(
            f"after its rename, checking that {final} is the folder this save made failed: "
            f"{type(exc).__name__}: {exc}", f"{final} is in place but unchecked{kept}",
            f"Check the file system under {root} and that {final} loads") from exc
    if not ours:  # before the aside copy is removed: it may be the step's only good one
        raise AfterRenameError(
            f"{final} is not the folder this save made: another process replaced its temporary folder "
            f"{tmp.name} at the rename", f"{final} holds that other folder{kept}",
            f"Stop whatever else writes in {root} and check {final} (loading refuses it unless whole)")
    try:
        _fsync_dir(root)
    except OSError as exc:
        # the aside copy stays: until the folder is synced, a crash may bring back the names before the rename
        raise AfterRenameError(
            f"after its rename, syncing the folder {root} failed: {type(exc).__name__}: {exc}",
            f"{final} is in place, written whole, but a crash may undo its rename{kept}",
            f"Check the file system under {root}") from exc
    # committed: a copy left here is never listed while ``final`` stands, and the next commit or
    # prune of this step removes it, so a failure now does not fail the save
    try:
        stale_copies = _asides_of(root, step)
    except OSError:
        stale_copies = []
    for stale in dict.fromkeys(([aside] if aside is not None else []) + stale_copies):
        try:
            _discard(stale)
        except OSError:
            pass


def is_leftover(path: Path, final: Path) -> bool:
    """A folder a save of ``final``'s step left when it died: ``.tmp-step_<N>-<random>`` (or
    ``.tmp-step_<N>``, the name earlier versions used), a real folder, not a link."""
    name = f".tmp-{final.name}"
    if path.name != name and not path.name.startswith(name + "-"):
        return False
    return _is_real_dir(path)


class SaveFolder:
    """Rank 0's hold on the temporary folder: made new under a random name, kept open, so that the
    commit changes the permissions of, and renames, the folder it made and no other."""

    def __init__(self, root: Path, final: Path) -> None:
        for leftover in root.iterdir():
            if is_leftover(leftover, final):  # a save of this step that died earlier
                shutil.rmtree(leftover)
        # mkdtemp: created exclusively (a name taken by anything, a link included, is skipped), 0700
        self.path = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=root))
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            raise SwappedFileError(f"{self.path} is no longer the folder this save made (another process "
                                   "replaced it)") from None

    def is_ours(self) -> bool:
        """The folder's name still holds the folder this save made (not one swapped in)."""
        return same_folder(self.path, os.fstat(self.fd))

    def commit(self, final: Path) -> None:
        os.fchmod(self.fd, 0o777 & ~current_umask())  # as a plain mkdir would have made it
        os.fsync(self.fd)
        made = os.fstat(self.fd)
        if not same_folder(self.path, made):
            raise SwappedFileError(f"{self.path} is no longer the folder this save made (another process renamed "
                                   "or replaced it): not committed")
        commit_folder(self.path, final, made)

    def close(self) -> None:
        os.close(self.fd)


def same_folder(path: Path, made: os.stat_result) -> bool:
    try:
        now = os.lstat(path)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (made.st_dev, made.st_ino)


def fsync_dirs(folder: Path) -> None:
    """The folders' entries (the files themselves are synced by the ranks that wrote them)."""
    for path in sorted(folder.rglob("*")):
        if path.is_dir():
            _fsync_dir(path)
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
