"""Output paths: everything derived from input data stays inside the output folder."""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

from vfm_plugins.files import NotRegularFileError, open_regular, rename_into_place, replace_file

from vfm_curator.errors import DiskFullError


def safe_join(root: str | Path, *parts: str) -> Path:
    """``root/parts...`` resolved; raises ``ValueError`` if the result would leave ``root``
    (absolute parts, ``..``, symlinks pointing out)."""
    base = Path(root).resolve()
    path = base.joinpath(*parts).resolve()
    if path != base and base not in path.parents:
        raise ValueError(f"path {os.path.join(*parts)!r} escapes the output folder {str(base)!r}")
    return path


def output_path(root: str | Path, *parts: str) -> Path:
    """``root/parts...`` for a file that is written, renamed into place or deleted: its folder is
    resolved and must stay inside ``root`` (``ValueError`` otherwise, as :func:`safe_join`), its own
    name is not. A link planted at that name (an output folder from elsewhere holding
    ``clips/<id>.mp4 -> <another id>.mp4``, or one pointing out of the folder) is then what a rename
    replaces or a delete removes, never the file it points to; :func:`safe_join` resolved it, so the
    write replaced the other clip (or was refused, ending the run). Readers keep :func:`safe_join`."""
    relative = Path(*parts)
    if relative.name in ("", ".", ".."):
        raise ValueError(f"path {str(relative)!r} names no file in the output folder {str(Path(root).resolve())!r}; "
                         "accepted: a file name, optionally under folders of the output folder")
    return safe_join(root, *relative.parent.parts) / relative.name


def remove_folder(path: Path) -> None:
    """Delete the scratch folder at ``path`` with what it holds (errors inside it ignored: it is made
    anew). A link there (or a file) is removed itself (an error doing so is raised): a link planted at a work folder's name
    (``.state/dedup -> ../clips``) is not the run's folder, and deleting through it emptied its target."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        os.unlink(path)


def atomic_write(path: Path, data: bytes) -> None:
    """Write a new file and rename it over ``path`` (:func:`vfm_plugins.files.replace_file`, fsynced
    first), so a killed run never leaves a half-written file under the final name, and a planted link
    at ``path`` or at a temporary name is replaced, never written through. A full disk raises
    :class:`DiskFullError` naming the file (and leaves no temporary file)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, data, durable=True)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise disk_full(path) from exc
        raise


def append_line(path: Path, line: str) -> None:
    """Append ``line`` and a newline to the log at ``path`` (made if missing). A symbolic link at
    ``path`` (an output folder from elsewhere holding ``balancer.jsonl -> ~/.bashrc``) is removed and
    a new file made there, its target untouched: a log is appended to in place, so it cannot be
    renamed over the link the way :func:`atomic_write` does, and a link there holds none of its lines."""
    fd = open_replacing_link(path, os.O_WRONLY | os.O_APPEND)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def open_replacing_link(path: Path, flags: int, mode: int = 0o666) -> int:
    """``os.open`` of the file at ``path``, made if missing; a symbolic link there is removed and a
    new file made in its place, its target neither opened nor touched (a file the folder keeps
    open in place, a log or a lock, cannot be renamed over a link the way :func:`atomic_write` is)."""
    flags |= os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags, mode)
    except OSError as exc:
        if exc.errno != errno.ELOOP:  # ELOOP: O_NOFOLLOW met a link
            raise
        os.unlink(path)
        return os.open(path, flags, mode)


def open_if_file(path: Path, flags: int) -> int | None:
    """``os.open`` of the file at ``path``, or None when there is none: missing (its folder too), a
    symbolic link (never followed) or a named pipe, device or folder (never waited on:
    :func:`vfm_plugins.files.open_regular`), none of them a file the folder made (a pipe in a run folder
    from elsewhere hung a resume)."""
    try:
        return open_regular(path, flags)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, NotRegularFileError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise


def read_text_if_file(path: Path) -> str:
    """The UTF-8 text of the regular file at ``path`` (:func:`open_if_file`); ``FileNotFoundError`` when
    there is none, so a state file that is a pipe, a device or a link reads as missing."""
    fd = open_if_file(path, os.O_RDONLY)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, "no regular file", str(path))
    with os.fdopen(fd, encoding="utf-8") as fh:
        return fh.read()


def atomic_rename(src: Path, path: Path) -> None:
    """Move a finished file (written elsewhere in the same folder) to ``path``: fsync, then rename, so
    ``path`` is never a half-written file; a link at ``path`` is replaced, and ``src`` must still be
    the regular file written (:func:`vfm_plugins.files.rename_into_place`). A full disk raises
    :class:`DiskFullError` naming ``path``."""
    try:
        rename_into_place(src, path, durable=True)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise disk_full(path) from exc
        raise


def disk_full(path: Path) -> DiskFullError:
    return DiskFullError(f"no space left on the device writing {path}: free space there (or choose another -o) "
                         "and run again; what finished is kept")


#: What marks a folder as a pipeline's output (an interrupted first run has only ``.state/``).
OUTPUT_MARKERS = {"vfm curate": ("clips.parquet", ".state/videos"), "vfm shard": ("shard_config.json", "blend.yaml")}


def check_not_other_output(out: Path, mine: str, option: str = "-o") -> None:
    """Refuse an output folder that holds the other pipeline's output (``mine``: ``"vfm curate"`` or
    ``"vfm shard"``): both write summary.json and failures.jsonl there, so one run would overwrite
    the other's (``vfm shard out -o out`` did)."""
    for owner, markers in OUTPUT_MARKERS.items():
        found = [m for m in markers if (out / m).exists()]
        if owner != mine and found:
            raise ValueError(f"{option} {out} is the output folder of `{owner}` (it holds {found[0]}), which this run would "
                             f"overwrite; accepted: a new folder, or one that `{mine}` wrote")


def check_out_folder(out: Path, option: str = "-o") -> None:
    """An output folder must be a folder (new, or an earlier output): one line otherwise."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"{option} {out} is a file; accepted: a folder (new, or the output of an earlier run)")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{option} {out}: {parent} is a file; accepted: a folder path")
            break
    _check_writable(out, option)


def _check_writable(out: Path, option: str) -> None:
    """The output folder (for a new one, the nearest folder above it that exists) must take new files:
    a read-only disk or another user's folder is one line before any work, not a traceback from the
    first file the run writes (its lock file)."""
    existing = next((p for p in (out, *out.parents) if p.is_dir()), None)
    if existing is None or os.access(existing, os.W_OK | os.X_OK):
        return
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    why = "is on a read-only file system" if read_only else "is not writable by this user"
    raise ValueError(f"{option} {out}: {existing} {why}; accepted: a folder where this user can create files")
