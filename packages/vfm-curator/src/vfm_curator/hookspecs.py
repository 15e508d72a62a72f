"""Hook specifications of the vfm_curator plugin host: each hook receives one
:class:`vfm_plugins.Register` callback and calls it once per name it provides."""

from __future__ import annotations

import pluggy

from vfm_plugins import Register

hookspec = pluggy.HookspecMarker("vfm_curator")


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
    ``captioner_options``) have ``caption(frames: list of (H, W, 3) uint8) -> str``; optionally
    ``caption_many``, ``provenance`` and ``check_options`` (see :mod:`vfm_curator.captioners`)."""


@hookspec
def vfm_curator_register_scorers(register: Register) -> None:
    """Register clip scores for the ``filter`` stage. Target: a class whose instances (built with the
    scorer's ``options``) are callables ``score(clip, task) -> float``."""


@hookspec
def vfm_curator_register_shot_detectors(register: Register) -> None:
    """Register shot detectors for the ``split`` stage (``method = NAME``). Target: a
    :class:`vfm_curator.shot_detectors.ShotDetector` subclass: built with the stage's
    ``detector_options``, it turns one score per frame into shots with
    ``spans(scores (T,), fps=...) -> [(start, end), ...]``; with ``frame_size = (w, h)`` it scores
    decoded frames itself (``frame_scores(frames) -> (T,)``), else it reads the decode stage's HSV
    content change (``task.cut_scores``)."""
