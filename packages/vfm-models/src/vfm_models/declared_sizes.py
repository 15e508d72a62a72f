"""What a component whose size its model folder sets (a VAE's latent channels, a text encoder's width)
declares unbuilt (``declared_latent_channels`` / ``declared_width``): the number in the folder's
config.json, nothing else read, so an export naming the folder is checked when it is written."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Iterable

from vfm_plugins import json_data

#: config.json files of model folders are a few KiB: a larger one is not read here (checked when built)
MAX_CONFIG_BYTES = 1 << 20


def folder_config_int(path: str | PathLike | None, keys: tuple[str, ...],
                      subfolders: Iterable[str] = ()) -> int | None:
    """The positive integer under the first of ``keys`` that ``path/config.json`` has (else the first
    ``path/<subfolder>/config.json`` there is, as the component finds its folder), or None when there is none
    to read or it is not one: the component then declares nothing and is checked when it is built. Several
    keys for a size with aliases, the one the library reading the config keeps first."""
    if path is None:
        return None
    for folder in (Path(path), *(Path(path) / sub for sub in subfolders)):
        config = folder / "config.json"
        try:
            if not config.is_file():
                continue
            if config.stat().st_size > MAX_CONFIG_BYTES:
                return None
            doc = json_data.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # unreadable, not UTF-8, not JSON or nested too deep to read
            return None
        if not isinstance(doc, dict):
            return None
        value = next((doc[key] for key in keys if key in doc), None)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
    return None
