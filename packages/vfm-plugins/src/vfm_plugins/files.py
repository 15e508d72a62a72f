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


@contextlib.contextmanager
def fresh_file(path: str | os.PathLike, *, durable: bool = False) -> Iterator[Path]:
    """A new empty temporary file beside ``path``, for the block to write; renamed to ``path`` when
    the block ends, with the permissions an ordinary new file gets (mkstemp makes it 0600). With
    ``durable`` the data is fsynced before the rename (a crash then leaves the old file or the new
    one, never an empty one). If the block or the rename fails, the temporary file is removed."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        if durable:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replace_file(path: str | os.PathLike, data: bytes | str, *, durable: bool = False) -> None:
    """Write ``data`` (text as UTF-8) as a new file renamed over ``path`` (:func:`fresh_file`)."""
    with fresh_file(path, durable=durable) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
