"""The unit of work of the sharding pipeline: one curated clip (or image) on its way to a sample."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class ShardTask:
    """One row of ``clips.parquet`` (or an image); the stages fill in frames, latent and text.

    Arrays travel as numpy between Ray workers (cheap to pickle, zero-copy in the object store).
    """

    id: str  # the clip id: the sample key in the shards
    path: str  # absolute path of the clip mp4 or the image file
    source: str = ""  # the raw video it was cut from
    video_id: str = ""  # that video's id in the clip table ("": a table without one)
    split_key: str = ""  # what its split is drawn from (shard_split.split_key: the video's content): its clips share a split
    caption: str | None = None
    caption_by: dict[str, str] = field(default_factory=dict)  # from clips.parquet: captioner, model, prompt
    fps: float = 0.0
    span: tuple[float, float] = (0.0, 0.0)  # seconds in the source
    modality: str = "video"  # "image" for image files and 1-frame clips
    size: tuple[int, int] = (0, 0)  # (height, width) of the clip before resize/crop
    bucket: str = ""  # "<H>x<W>x<T>", the sub-dataset it goes to
    upscale: float = 1.0  # how much the bucket enlarged the frame (<= 1: not enlarged)
    crop: float = 0.0  # part of the scaled frame's area the centre crop cut away
    frames: np.ndarray | None = None  # (N*T, H, W, 3) uint8, exactly what the tokenizer gets: N windows
    window: int = 0  # T, the frames of one sample (0: all of ``frames``, one sample)
    stride: int = 1  # every stride-th frame of the clip was taken
    cut_short: bool = False  # windows = 0 kept fewer windows than the clip fills (shard_decode.ALL_WINDOWS_BYTES)
    latent: np.ndarray | None = None  # (C, T', H', W') float32 of one sample, or (N, C, T', H', W') of N windows
    text: np.ndarray | None = None  # (L, D) float32, real tokens only
    failure: dict[str, str] | None = None  # {"stage", "reason", "cause": input|config|machine, "kind"}
    timings: dict[str, float] = field(default_factory=dict)
    attempt: int = 1  # 1 for a first try; counts machine failures across runs (see vfm_curator.failures)

    def windows(self) -> np.ndarray:
        """``frames`` as (N, T, H, W, 3): the samples' frames, one window each."""
        assert self.frames is not None
        t = self.window or len(self.frames)
        return self.frames.reshape(len(self.frames) // t, t, *self.frames.shape[1:])

    def latents(self) -> np.ndarray:
        """``latent`` as (N, C, T', H', W'), one per sample (a stage may set one sample's 4-D latent)."""
        assert self.latent is not None
        return self.latent[None] if self.latent.ndim == 4 else self.latent

    def sample_key(self, k: int) -> str:
        """Window ``k``'s key in the shards: the clip id for the first, ``<id>-w<k>`` for the others."""
        return self.id if k == 0 else f"{self.id}-w{k}"

    def window_span(self, k: int) -> tuple[float, float]:
        """Window ``k``'s own seconds in the source (a video's windows are ``window * stride`` frames of
        the clip's constant rate); the clip's span for an image or a clip without a rate."""
        frames = self.window * self.stride
        if self.modality != "video" or frames <= 0 or self.fps <= 0:
            return self.span
        return (self.span[0] + k * frames / self.fps, min(self.span[1], self.span[0] + (k + 1) * frames / self.fps))

    def fail(self, stage: str, reason: str, cause: str = "input", kind: str = "error") -> None:
        if self.failure is None:
            self.failure = {"stage": stage, "reason": reason, "cause": cause, "kind": kind}

    def failure_record(self) -> dict[str, Any]:
        """The line this task gets in ``failures.jsonl``."""
        return {"id": self.id, "path": self.path, "source": self.source, **(self.failure or {}), "attempts": self.attempt}


def credit_time(tasks: list[ShardTask], stage: str, seconds: float) -> None:
    """Share the time of one batched call equally among its tasks (for the per-stage timings)."""
    for task in tasks:
        task.timings[stage] = task.timings.get(stage, 0.0) + seconds / max(len(tasks), 1)
