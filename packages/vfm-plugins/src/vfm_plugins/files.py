"""Files written whole and new: a temporary file made beside the target, renamed over it once written.

Two things every package's writers need. A reader (or a resumed run) never sees half a file under
the final name. And a name that is a planted link (an output folder from elsewhere holding
``summary.json -> ~/.bashrc``, or ``.summary.json.tmp`` pointing the same way) is replaced, never
written through: the temporary file is created by :func:`tempfile.mkstemp` (``O_CREAT | O_EXCL``, so no
link is followed) and the rename replaces the directory entry, link or not. The file renamed into place
is the one written: :func:`replace_file` writes through the descriptor it created the file with, and the
rename checks (``fstat`` against ``lstat``, before and after) that no other process swapped the name for
a link or another file in between (:class:`SwappedFileError`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path


def current_umask() -> int:
    """This process's umask, read without changing it where Linux shows it (another thread could
    create a file in the moment a set-and-restore leaves the umask at another value)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temporary_file(folder: str | os.PathLike, *, prefix: str, suffix: str = ".tmp") -> Path:
    """A new empty file in ``folder`` named ``prefix`` + random characters + ``suffix``, with the
    permissions an ordinary new file gets (mkstemp makes it 0600). Created with ``O_CREAT | O_EXCL``:
    a link planted at any name is never followed, and no other process holds the same name. The
    prefix and suffix are what a sweep of a killed run's leftovers matches (a glob of them)."""
    fd, tmp = _create(folder, prefix, suffix)
    os.close(fd)
    return tmp


def _create(folder: str | os.PathLike, prefix: str, suffix: str) -> tuple[int, Path]:
    """:func:`temporary_file`, its descriptor kept open for the caller to write through."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=suffix)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, Path(tmp)


class SwappedFileError(OSError):
    """A temporary file's name no longer names the file written (another process writing in the folder
    put a link or another file there): nothing was renamed through it, or what was is named."""


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class NotRegularFileError(OSError):
    """What :func:`open_regular` opened is a named pipe, a device, a socket or a folder, not a file."""


def open_regular(path: str | os.PathLike, flags: int = os.O_RDONLY, mode: int = 0o666, *,
                 follow_links: bool = False) -> int:
    """``os.open`` of ``path``, refused (:class:`NotRegularFileError`, the descriptor closed) unless it
    is a regular file. ``O_NONBLOCK``: opening a named pipe from a folder from elsewhere waited for a
    writer forever; on a regular file Linux ignores it, so the descriptor reads and writes as usual. The
    check is ``fstat`` on the descriptor opened, not a ``stat`` before, which a swap in between escapes. A
    symbolic link is not followed (``O_NOFOLLOW``: ``ELOOP``) unless ``follow_links``."""
    flags |= os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    fd = os.open(path, flags, mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegularFileError(errno.EINVAL, "not a regular file (a named pipe, a device, a socket or a folder)",
                                  str(path))
    return fd


def read_regular(path: str | os.PathLike, *, follow_links: bool = False) -> bytes:
    """The bytes of the regular file at ``path``, opened by :func:`open_regular` (a named pipe there is
    :class:`NotRegularFileError`, never waited on)."""
    with open(open_regular(path, follow_links=follow_links), "rb") as fh:
        return fh.read()


def _open_written(tmp: str | os.PathLike) -> int:
    """A descriptor of the finished ``tmp``, refused unless it is a regular file (:func:`open_regular`)."""
    try:
        return open_regular(tmp)
    except NotRegularFileError:
        raise SwappedFileError(f"temporary file {tmp} is no longer a regular file: another process is writing "
                               "in its folder") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SwappedFileError(f"temporary file {tmp} is now a symbolic link (to {os.readlink(tmp)}), "
                                   "not the file written: another process is writing in its folder") from None
        raise


def _rename_written(fd: int, tmp: Path, path: str | os.PathLike, durable: bool) -> None:
    """Rename ``tmp`` to ``path`` if it still names the file open as ``fd``; permissions and fsync go
    through ``fd`` (a chmod by name follows a link swapped in since). The check after the rename names a
    swap made between the check before it and the rename."""
    os.fchmod(fd, 0o666 & ~current_umask())
    if durable:
        os.fsync(fd)
    written = os.fstat(fd)
    try:
        now = os.lstat(tmp)
    except FileNotFoundError:
        raise SwappedFileError(f"temporary file {tmp} is gone before its rename to {path}: another process is "
                               "writing in its folder") from None
    if not _same_file(now, written):
        raise SwappedFileError(f"temporary file {tmp} is no longer the file written (another file or a link is "
                               f"there): not renamed to {path}; another process is writing in its folder")
    os.replace(tmp, path)
    if not _same_file(os.lstat(path), written):
        raise SwappedFileError(f"{path} is not the file written: another process swapped its temporary file "
                               f"{tmp.name} at the rename; check {path} and what else writes in its folder")


def rename_into_place(tmp: str | os.PathLike, path: str | os.PathLike, *, durable: bool = False) -> None:
    """Rename the finished ``tmp`` (in ``path``'s folder) to ``path``, with the permissions an
    ordinary new file gets (again: a writer may have made the file anew, safetensors with 0600); the
    rename replaces the directory entry, a link there or not. With ``durable`` the data is fsynced
    first (a crash then leaves the old file or the new one, never an empty one). ``tmp`` must be a regular
    file, not a link (:class:`SwappedFileError`): the writer wrote it by name, so another process writing
    in the folder could have swapped it since; the file checked is the one renamed (``fstat``/``lstat``)."""
    fd = _open_written(tmp)
    try:
        _rename_written(fd, Path(tmp), path, durable)
    finally:
        os.close(fd)


@contextlib.contextmanager
def fresh_file(path: str | os.PathLike, *, durable: bool = False, prefix: str | None = None,
               suffix: str = ".tmp") -> Iterator[Path]:
    """A new empty temporary file beside ``path`` (:func:`temporary_file`, named
    ``.NAME.<random>.tmp`` unless ``prefix`` / ``suffix`` say otherwise: PyAV picks the container from
    the suffix), for the block to write; renamed to ``path`` when the block ends
    (:func:`rename_into_place`). If the block or the rename fails, the temporary file is removed."""
    path = Path(path)
    tmp = temporary_file(path.parent, prefix=f".{path.name}." if prefix is None else prefix, suffix=suffix)
    try:
        yield tmp
        rename_into_place(tmp, path, durable=durable)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_leftover(path: str | os.PathLike) -> bool:
    """Delete ``path`` if it is a regular file (a killed run's temporary file); returns whether it did.
    Anything else under a temporary name (a link, a folder) is not a file a writer made: left alone."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def replace_file(path: str | os.PathLike, data: bytes | str, *, durable: bool = False) -> None:
    """Write ``data`` (text as UTF-8) as a new file renamed over ``path`` (named as :func:`fresh_file`
    names it). Written through the descriptor that created the file, never reopened by name."""
    path = Path(path)
    fd, tmp = _create(path.parent, f".{path.name}.", ".tmp")
    try:
        with open(fd, "wb", closefd=False) as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
        _rename_written(fd, tmp, path, durable)
    except BaseException:
        tmp.unlink(missing_ok=True)  # ours, or a link swapped in: removing a link leaves its target alone
        raise
    finally:
        os.close(fd)
