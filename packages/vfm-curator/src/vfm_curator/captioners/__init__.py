"""Captioners: ``caption(frames: list[(H, W, 3) uint8]) -> str`` for one clip.

Registered under the ``captioners`` kind; the ``caption`` stage uses one only when asked to.
Optional, used when present: ``caption_many(clips) -> list[str | Exception]`` (several clips at once,
a failed clip's exception in its place), ``provenance`` (a dict such as ``{"model", "prompt"}``
recorded with every caption it makes) and a classmethod ``check_options(**options)`` (raises
``ValueError`` for a bad option, cheaply, in the driver before any work).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class Captioner(Protocol):
    def caption(self, frames: list[np.ndarray]) -> str: ...


def get_captioner(name: str, **options: Any) -> Captioner:
    from vfm_curator.plugins import host

    return host.build("captioners", name, options)
