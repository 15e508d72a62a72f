"""What a component whose size its model folder sets (a VAE's latent channels, a text encoder's width)
declares unbuilt (``declared_latent_channels`` / ``declared_width``): the number in the folder's
config.json, nothing else read, so an export naming the folder is checked when it is written."""

from __future__ import annotations

import json
from os import PathLike
from pathlib import Path
from typing import Iterable

#: config.json files of model folders are a few KiB: a larger one is not read here (checked when built)
MAX_CONFIG_BYTES = 1 << 20


def folder_config_int(path: str | PathLike | None, key: str, subfolders: Iterable[str] = ()) -> int | None:
    """The positive integer ``key`` of ``path/config.json`` (else of the first ``path/<subfolder>/config.json``
    there is, as the component finds its folder), or None when there is none to read or it is not one: the
    component then declares nothing and is checked when it is built."""
    if path is None:
        return None
    for folder in (Path(path), *(Path(path) / sub for sub in subfolders)):
        config = folder / "config.json"
        try:
            if not config.is_file():
                continue
            if config.stat().st_size > MAX_CONFIG_BYTES:
                return None
            value = json.loads(config.read_text(encoding="utf-8")).get(key)
        # unreadable, not JSON (or nested past Python's stack), not an object
        except (OSError, ValueError, AttributeError, RecursionError):
            return None
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
    return None
