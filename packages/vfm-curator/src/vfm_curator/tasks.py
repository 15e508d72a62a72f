"""The unit of work that flows through a pipeline: one source video and the clips cut from it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def video_id(source: str) -> str:
    """A stable id for a source video (its resolved path or URI)."""
    # surrogateescape: a file name that is not UTF-8 still gets an id (its record says why it failed)
    return hashlib.sha1(source.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def clip_id(source: str, start: int, end: int) -> str:
    """Deterministic clip id: a hash of the source and the frame span ``[start, end)``."""
    return hashlib.sha1(f"{source}|{start}|{end}".encode("utf-8")).hexdigest()[:20]


class _Samples:
    """``Clip.samples``: the frames in memory, or else read from the clip's staged samples file on
    each access (not cached: holding them is what the file avoids), so every stage, plugins
    included, sees the frames whichever way the transcode stage kept them. A data descriptor that
    the dataclass takes as the field's default (an empty tuple, stored as a list)."""

    def __get__(self, clip: "Clip | None", owner: type | None = None):
        if clip is None:
            return ()  # the dataclass default: Clip() starts with no frames
        frames = clip.__dict__.get("_samples")
        if frames or not clip.samples_file:
            return clip.__dict__.setdefault("_samples", [])
        return load_samples(clip.samples_file)

    def __set__(self, clip: "Clip", frames) -> None:
        clip.__dict__["_samples"] = list(frames)


def load_samples(path: str) -> list[np.ndarray]:
    """Sampled frames from a staging ``.npz`` (io/staging.py writes them; no pickles read). Here, with
    Clip, because reading them is part of what a clip is (floor 0: tasks imports no io module)."""
    with np.load(path, allow_pickle=False) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


@dataclass
class Clip:
    """A span ``[start, end)`` of frames of one source video, and what the stages learn about it."""

    start: int
    end: int
    start_s: float = 0.0
    end_s: float = 0.0
    id: str = ""
    mp4: bytes | None = None  # H264 bytes from the transcode stage (when it has no output folder)
    staged: str | None = None  # or the staging file it wrote them to (io/staging.py; the write stage renames it)
    staged_size: int = 0
    width: int = 0
    height: int = 0
    num_frames: int = 0
    # a few (H, W, 3) uint8 frames (first, middle, last): in memory, or read from ``samples_file`` (a
    # staging file) on each access, so a task holding hundreds of clips stays small (see _Samples)
    samples: list[np.ndarray] = _Samples()  # type: ignore[assignment]
    samples_file: str | None = None
    embedding: np.ndarray | None = None  # (D,) float32
    caption: str | None = None
    caption_by: dict[str, str] = field(default_factory=dict)  # captioner (manifest, sidecar, a name), model, prompt
    scores: dict[str, float] = field(default_factory=dict)
    rejected: str | None = None  # why a filter dropped it

    @property
    def length(self) -> int:
        return self.end - self.start

    @property
    def has_samples(self) -> bool:
        """Whether the clip has sampled frames, without reading a staged samples file."""
        return bool(self.samples_file) or bool(self.__dict__.get("_samples"))

    @property
    def encoded(self) -> bool:
        """Whether the transcode stage made this clip (in memory or as a staging file)."""
        return self.mp4 is not None or self.staged is not None


@dataclass
class VideoTask:
    """One source video. Stages fill it in; a stage that raises marks it failed with a reason."""

    source: str  # resolved path
    vid: str = ""
    caption: str | None = None  # an existing caption from the manifest or a sidecar file
    meta: dict[str, Any] = field(default_factory=dict)  # fps, frames, width, height, duration, rotation
    # Per-frame figures from the decode stage's single streaming pass (no frames are kept, so a
    # task's size grows by 16 bytes per frame, not by its pixels); pixels again: io.video.frames_at.
    times: np.ndarray | None = None  # (T,) float64 presentation time of each frame in seconds
    cut_scores: np.ndarray | None = None  # (T,) float32 HSV content change from the previous frame
    motion: np.ndarray | None = None  # (T,) float32 mean |grey(i) - grey(i-1)| / 255, in [0, 1]
    small_size: tuple[int, int] | None = None  # (width, height) of the downscaled frames scored
    clips: list[Clip] = field(default_factory=list)
    failure: dict[str, str] | None = None  # {"stage", "reason", "cause": input|config|machine, "kind"}
    timings: dict[str, float] = field(default_factory=dict)  # seconds spent per stage
    # set by the driver, copied into the record: attempt (1, 2, ...), input_stamp (size, mtime_ns),
    # options_hashes (stage -> hash of the options up to it; see vfm_curator.failures)
    context: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.vid:
            self.vid = video_id(self.source)

    @property
    def duration(self) -> float:
        return float(self.meta.get("duration", 0.0))

    def fail(self, stage: str, reason: str, cause: str = "input", kind: str = "error") -> None:
        if self.failure is None:
            self.failure = {"stage": stage, "reason": reason, "cause": cause, "kind": kind}
