"""The interface every metric implements, and the run that reads videos and applies metrics by name."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np


@dataclass(frozen=True)
class EvalItem:
    """One generated video and the prompt it was generated for."""

    prompt: str
    frames: np.ndarray  # (T, H, W, 3) uint8 RGB
    path: Path | None = None


@dataclass
class MetricResult:
    """``per_video``: one dict per item, in order (empty for a metric of the whole set, e.g. FVD);
    ``summary``: numbers over the set (counts, means, the set-level score); ``notes``: lines a reader
    needs to read the numbers (e.g. why some videos were not scored)."""

    per_video: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class MetricWarning(UserWarning):
    """A caveat about a metric's numbers (also in its ``MetricResult.notes``, which ``vfm eval`` prints)."""


class Metric(ABC):
    """Scores a set of generated videos. Options arrive as keyword arguments (``vfm eval --option
    key=value``), e.g. a local weights path; a metric that needs something missing raises
    ValueError saying what."""

    name: ClassVar[str] = ""

    @abstractmethod
    def evaluate(self, items: Sequence[EvalItem]) -> MetricResult:
        """The per-video scores and the summary of ``items``."""


def load_metric(name: str, options: Mapping[str, Any] | None = None) -> Metric:
    """The registered metric ``name`` built with ``options`` (unknown names list the available ones)."""
    from vfm_infer.plugins import host

    return host.build("metrics", name, options)


def read_items(folder: str | Path, prompts: Sequence[str]) -> list[EvalItem]:
    """The videos ``folder/0000.mp4``, ``0001.mp4``, ... (what ``vfm generate`` writes: video i is
    prompt i) paired with ``prompts``; a missing folder or video is a FileNotFoundError naming it, a
    file that does not decode as a video a ValueError naming it."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"the videos folder {folder} " + ("is not a folder" if folder.exists() else "does not exist"))
    paths = [folder / f"{i:04d}.mp4" for i in range(len(prompts))]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} of {len(prompts)} videos are missing (video i is prompt i): {', '.join(missing[:3])}")
    return [EvalItem(prompt, decoded(path, hint="; vfm eval reads what vfm generate writes"), path)
            for prompt, path in zip(prompts, paths)]


def decoded(path: Path, *, max_frames: int | None = None, named: str = "", hint: str = "") -> np.ndarray:
    """The frames of ``path`` (every one, or the first ``max_frames``) as ``read_mp4`` decodes them; what PyAV
    cannot decode is a ValueError naming the file, as ``{named}{path} is not a video PyAV can decode
    ({reason}){hint}`` (PyAV's own error reads "[Errno 1094995529] Invalid data found when processing input")."""
    import av

    from vfm_infer.video.mp4 import read_mp4

    try:
        return read_mp4(path, max_frames=max_frames)
    except (av.error.FFmpegError, IndexError) as exc:  # IndexError: no video stream
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise ValueError(f"{named}{path} is not a video PyAV can decode ({reason}){hint}") from None
    except ValueError as exc:  # no frame (read_mp4's message names the file)
        raise ValueError(f"{named}{exc}{hint}") from None


def videos_without_prompts(folder: str | Path, prompts: Sequence[str]) -> list[str]:
    """Names of the ``NNNN.mp4`` files in ``folder`` past the last prompt: videos no prompt pairs with
    (a prompts file other than the one ``vfm generate`` was given, or another run's videos)."""
    folder = Path(folder)
    names = (p.name for p in folder.glob("[0-9][0-9][0-9][0-9].mp4")) if folder.is_dir() else ()
    return sorted(n for n in names if int(n[:4]) >= len(prompts))


def evaluate(items: Sequence[EvalItem], metrics: Mapping[str, Mapping[str, Any] | Metric]) -> dict[str, MetricResult]:
    """Each named metric (with its options, or already built by :func:`load_metric`) applied to ``items``;
    one whose ``evaluate`` returns something else than a :class:`MetricResult` is a TypeError naming it
    and its provider."""
    from vfm_infer.plugins import host
    from vfm_plugins import PluginResultError

    results = {}
    for name, options in metrics.items():
        metric = options if isinstance(options, Metric) else load_metric(name, options)
        result = metric.evaluate(items)
        if not isinstance(result, MetricResult):
            entry = host.entry("metrics", name)
            raise PluginResultError(f"metric {name!r} (from {entry.provider} {entry.version}) returned a {type(result).__name__} "
                            "from evaluate; it must return a vfm_infer.metrics.MetricResult(per_video, summary, notes)")
        results[name] = result
    return results
