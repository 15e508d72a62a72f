"""Output paths: everything derived from input data stays inside the output folder."""

from __future__ import annotations

import os
from pathlib import Path


def safe_join(root: str | Path, *parts: str) -> Path:
    """``root/parts...`` resolved; raises ``ValueError`` if the result would leave ``root``
    (absolute parts, ``..``, symlinks pointing out)."""
    base = Path(root).resolve()
    path = base.joinpath(*parts).resolve()
    if path != base and base not in path.parents:
        raise ValueError(f"path {os.path.join(*parts)!r} escapes the output folder {str(base)!r}")
    return path


def atomic_write(path: Path, data: bytes) -> None:
    """Write then rename, so a killed run never leaves a half-written file under the final name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
