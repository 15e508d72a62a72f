"""The interface every shot detector (built-in or plugin) implements."""

from __future__ import annotations

from typing import Any, ClassVar, Iterable

import numpy as np


class ShotDetector:
    """Turns a video into shots: ``spans(scores, fps=...)`` -> contiguous or gapped ``[start, end)``
    frame spans, from one score per frame.

    Where the scores come from is the detector's choice:

    - ``frame_size = None``: the decode stage's per-frame HSV content change (``task.cut_scores``,
      computed while decoding, so the detector costs nothing more than the rule);
    - ``frame_size = (w, h)``: the split stage decodes the video once more at that display size and
      hands every frame (``(h, w, 3)`` uint8 RGB, upright, in order) to :meth:`frame_scores`.

    Options are checked when the detector is built (the split stage builds it in the driver before
    any work, like every stage option): ``Detector(**options)`` accepts exactly ``defaults``'s keys.
    ``setup`` runs once per worker before the first video (load models there).
    """

    name: ClassVar[str] = "detector"
    defaults: ClassVar[dict[str, Any]] = {}
    frame_size: ClassVar[tuple[int, int] | None] = None

    def __init__(self, **options: Any) -> None:
        unknown = set(options) - set(self.defaults)
        if unknown:
            raise ValueError(f"shot detector {self.name!r}: unknown option(s) {', '.join(sorted(unknown))}; "
                             f"accepted: {', '.join(sorted(self.defaults)) or '(none)'}")
        self.opt: dict[str, Any] = {**self.defaults, **options}
        self.check_options()

    def check_options(self) -> None:
        """Raise ``ValueError`` naming an option outside its accepted range."""

    def number(self, key: str, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
               integer: bool = False) -> None:
        """Check ``self.opt[key]`` is a number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
        value = self.opt[key]
        kind = "an integer" if integer else "a number"
        ok = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok or value != value:
            raise ValueError(f"shot detector {self.name!r}: option {key} must be {kind}, got {value!r}")
        if (lo is not None and (value <= lo if lo_open else value < lo)) or (hi is not None and value > hi):
            raise ValueError(f"shot detector {self.name!r}: option {key} = {value!r} is out of range; accepted: "
                             f"{kind} in {'(' if lo_open else '['}{'-inf' if lo is None else lo}, "
                             f"{'inf' if hi is None else hi}]")

    def setup(self) -> None:
        """Load what every video needs (a model); runs once per worker."""

    def frame_scores(self, frames: Iterable[np.ndarray]) -> np.ndarray:
        """(T,) float32 scores of a stream of frames of :attr:`frame_size` (detectors that read frames)."""
        raise NotImplementedError(f"shot detector {self.name!r} reads the decode stage's content scores, not frames")

    def spans(self, scores: np.ndarray, *, fps: float) -> list[tuple[int, int]]:
        """Shots as ``[start, end)`` frame spans in order, from the (T,) per-frame scores."""
        raise NotImplementedError


def checked_spans(detector: ShotDetector, spans: Any) -> list[tuple[int, int]]:
    """What ``detector.spans(...)`` returned as ``[(start, end), ...]`` ints, or a
    :class:`~vfm_plugins.PluginResultError` naming the detector (a plugin's ``spans`` returning a count or
    flat cut indices failed each video with ``'int' object is not iterable``)."""
    def refuse(what: str):
        from vfm_plugins import PluginResultError

        cls = type(detector)
        return PluginResultError(f"shot detector {detector.name!r} (class {cls.__module__}.{cls.__qualname__}): spans "
                                 f"returned {what}; it must return a list of (start, end) frame spans, e.g. "
                                 f"shots_from_cuts(cuts, len(scores)) (vfm_curator.shot_detectors.spans)")

    if isinstance(spans, (str, bytes)) or not isinstance(spans, Iterable):
        raise refuse("None" if spans is None else f"{spans!r:.40}, of type {type(spans).__name__}")
    checked = []
    for span in spans:
        try:
            a, b = span
            checked.append((int(a), int(b)))
        except (TypeError, ValueError):
            raise refuse(f"the item {span!r:.40}") from None
    return checked

