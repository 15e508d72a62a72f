"""Hook specifications of the vfm_curator plugin host.

Every hook receives one argument, ``register``: call ``register(name, target, description=...)``
once per thing you provide. ``target`` is the object itself or a lazy ``"module:attr"`` string that
is imported only when the name is used. A name registered twice is an error naming both providers.
"""

from __future__ import annotations

from typing import Any, Protocol

import pluggy

hookspec = pluggy.HookspecMarker("vfm_curator")


class Register(Protocol):
    """The callback every hook receives."""

    def __call__(self, name: str, target: Any, *, description: str = "") -> None: ...


@hookspec
def vfm_curator_register_stages(register: Register) -> None:
    """Register curation stages (decode, split, stitch, transcode, embed, caption, filter, write, and sharding stages). Target: a stage class with declared resources and batch size."""


@hookspec
def vfm_curator_register_embedders(register: Register) -> None:
    """Register image/video embedders for the ``embed`` and ``stitch`` stages. Target: a class whose
    instances (built with the stage's ``embedder_options``) have ``dim`` and
    ``embed(frames (N, H, W, 3) uint8) -> (N, dim) float32`` returning unit vectors."""


@hookspec
def vfm_curator_register_captioners(register: Register) -> None:
    """Register clip captioners for the ``caption`` stage. Target: a class whose instances (built with
    ``captioner_options``) have ``caption(frames: list of (H, W, 3) uint8) -> str``."""


@hookspec
def vfm_curator_register_scorers(register: Register) -> None:
    """Register clip scores for the ``filter`` stage. Target: a class whose instances (built with the
    scorer's ``options``) are callables ``score(clip, task) -> float``."""
