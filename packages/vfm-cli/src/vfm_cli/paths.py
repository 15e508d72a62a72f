"""Checks on output folders that commands make: made before any work is done, so a path that
cannot be written fails at once instead of after training or sampling."""

from __future__ import annotations

import os
from pathlib import Path


def folder_problem(folder: Path) -> str | None:
    """Why ``folder`` cannot be used (or made) as an output folder, or None when it can."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        return f"{folder} is a file; name a folder (it is made if missing)"
    existing = folder
    while not existing.exists():  # the nearest folder that exists: the one the output is made in
        existing = existing.parent
    if not existing.is_dir():
        return f"{folder} cannot be made: {existing} is a file"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{folder} cannot be written: no write permission on {existing}"
    return None
