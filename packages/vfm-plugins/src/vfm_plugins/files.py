"""Files written whole and new: a temporary file made beside the target, renamed over it once written.

Two things every package's writers need. A reader (or a resumed run) never sees half a file under
the final name. And a name that is a planted link (an output folder from elsewhere holding
``summary.json -> ~/.bashrc``, or ``.summary.json.tmp`` pointing the same way) is replaced, never
written through: the temporary file is created by :func:`tempfile.mkstemp` (``O_CREAT | O_EXCL``, so no
link is followed) and the rename replaces the directory entry, link or not.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _umask() -> int:
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
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=suffix)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    return Path(tmp)


def rename_into_place(tmp: str | os.PathLike, path: str | os.PathLike, *, durable: bool = False) -> None:
    """Rename the finished ``tmp`` (in ``path``'s folder) to ``path``, with the permissions an
    ordinary new file gets (again: a writer may have made the file anew, safetensors with 0600); the
    rename replaces the directory entry, a link there or not. With ``durable`` the data is fsynced
    first (a crash then leaves the old file or the new one, never an empty one)."""
    os.chmod(tmp, 0o666 & ~_umask())
    if durable:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    os.replace(tmp, path)


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
    """Write ``data`` (text as UTF-8) as a new file renamed over ``path`` (:func:`fresh_file`)."""
    with fresh_file(path, durable=durable) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
