"""Captioners: ``caption(frames: list[(H, W, 3) uint8]) -> str`` for one clip.

Registered under the ``captioners`` kind; the ``caption`` stage uses one only when asked to.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class Captioner(Protocol):
    def caption(self, frames: list[np.ndarray]) -> str: ...


def get_captioner(name: str, **options: Any) -> Captioner:
    from vfm_curator.plugins import host

    return host.get("captioners", name)(**options)
