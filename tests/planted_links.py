"""The setup of the tests that check a writer replaces a symbolic link planted at a name it writes (a
folder from elsewhere holding ``summary.json -> ~/.bashrc``) and leaves the linked file alone."""

from __future__ import annotations

import os
from pathlib import Path


def plant_link(link: Path, outside: Path, text: str = "precious", *, relative: bool = False) -> Path:
    """A file ``outside/<link's name>`` holding ``text`` and a link to it at ``link`` (both folders
    made); returns the linked file, whose text the test then checks is unchanged. ``relative``: the
    link names its target from its own folder (``../kept/x``), as in a folder copied from elsewhere
    whose links still point inside it."""
    outside.mkdir(parents=True, exist_ok=True)
    victim = outside / link.name
    victim.write_text(text)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(victim, link.parent) if relative else victim)
    return victim
