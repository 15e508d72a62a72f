"""``shard_decode``: decode a clip (or image), pick its bucket, resize to cover and centre-crop to the
bucket's resolution, and keep the bucket's frame count. Its output is exactly what the tokenizer gets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from vfm_curator.io.video import iter_frames, probe
from vfm_curator.stages.base import InputError, LimitError, Resources, Stage
from vfm_curator.stages.shard_task import ShardTask

IMAGE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".webp", ".bmp"}


@dataclass(frozen=True)
class Bucket:
    """A sub-dataset: every sample in it has the same (height, width, frames)."""

    height: int
    width: int
    frames: int

    @property
    def name(self) -> str:
        return f"{self.height}x{self.width}x{self.frames}"

    @classmethod
    def parse(cls, name: str) -> "Bucket":
        h, w, t = (int(v) for v in name.split("x"))
        return cls(h, w, t)


def choose_resolution(height: int, width: int, resolutions: Sequence[Sequence[int]]) -> tuple[int, int]:
    """The (H, W) whose aspect ratio is closest to the clip's (in log space, so 2:1 and 1:2 are
    equally far from 1:1); the first listed wins a tie."""
    ratio = math.log(width / height)
    best = min(resolutions, key=lambda hw: abs(math.log(hw[1] / hw[0]) - ratio))
    return int(best[0]), int(best[1])


def choose_frames(available: int, frames: Sequence[int]) -> int | None:
    """The largest configured frame count that ``available`` frames can fill, or None."""
    fitting = [t for t in frames if t <= available]
    return max(fitting) if fitting else None


def cover_size(height: int, width: int, target_h: int, target_w: int) -> tuple[int, int]:
    """The smallest (h, w) with the clip's aspect ratio that covers (target_h, target_w)."""
    scale = max(target_h / height, target_w / width)
    return max(target_h, math.ceil(height * scale - 1e-9)), max(target_w, math.ceil(width * scale - 1e-9))


def center_crop(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    top, left = (frame.shape[0] - height) // 2, (frame.shape[1] - width) // 2
    return frame[top : top + height, left : left + width]


def load_frames(path: str, height: int, width: int, max_frames: int, stride: int = 1) -> np.ndarray:
    """Up to ``max_frames`` frames (every ``stride``-th from the start) of ``path`` at (height, width):
    FFmpeg scales each frame to cover the target with the clip's aspect ratio, then the centre is
    cropped. Returns (T, height, width, 3) uint8 RGB, upright. Images give T = 1."""
    info = probe(path)
    if info.width <= 0 or info.height <= 0:
        raise InputError(f"no frame size in the container ({info.width}x{info.height})")
    sh, sw = cover_size(info.height, info.width, height, width)
    scaled = (sh, sw) != (info.height, info.width)
    out = []
    for i, (_, frame) in enumerate(iter_frames(path, width=sw if scaled else None, height=sh if scaled else None)):
        if i % stride == 0:
            out.append(center_crop(frame, height, width))
            if len(out) == max_frames:
                break
    if not out:
        raise InputError("no decodable frame")
    return np.stack(out)


class ShardDecodeStage(Stage):
    """Sets ``task.frames`` ((T, H, W, 3) uint8), ``task.bucket``, ``task.modality`` and ``task.size``.

    ``resolutions``: the (H, W) buckets; a clip goes to the one nearest its aspect ratio.
    ``frames``: the video frame counts (each one the tokenizer accepts); a clip gets the largest it
    can fill with every ``frame_stride``-th frame. Images and 1-frame clips become 1-frame samples in
    an ``HxWx1`` bucket. A video too short for the smallest count fails with the counts it needed.
    """

    name = "shard_decode"
    resources = Resources(cpus=1.0, memory_mb=1024)
    defaults = {"resolutions": [[256, 256]], "frames": [17], "frame_stride": 1}

    def __init__(self, **options) -> None:
        super().__init__(**options)
        check_buckets(self.opt["resolutions"], self.opt["frames"], self.opt["frame_stride"])

    def process_one(self, task: ShardTask) -> None:
        info = probe(task.path)
        task.size = (info.height, info.width)
        height, width = choose_resolution(info.height, info.width, self.opt["resolutions"])
        stride = int(self.opt["frame_stride"])
        is_image = Path(task.path).suffix.lower() in IMAGE_EXTENSIONS
        frames = load_frames(task.path, height, width, 1 if is_image else max(self.opt["frames"]), stride)
        if is_image or len(frames) == 1 and info.frames <= 1:
            task.modality, count = "image", 1
        else:
            count = choose_frames(len(frames), self.opt["frames"])
            if count is None:  # the clip is fine, the configured buckets are too long for it
                raise LimitError(
                    f"too short: {len(frames)} frame(s) at stride {stride}; the shortest bucket takes "
                    f"{min(self.opt['frames'])} (frames = {list(self.opt['frames'])})", kind="too-short",
                )
            task.modality = "video"
        task.frames = np.ascontiguousarray(frames[:count])
        task.bucket = Bucket(height, width, count).name


def check_buckets(resolutions, frames, stride) -> None:
    """Clear errors for bucket options that cannot work."""
    if not resolutions or not all(len(r) == 2 and int(r[0]) > 0 and int(r[1]) > 0 for r in resolutions):
        raise ValueError(f"resolutions must be a non-empty list of [height, width] pairs, got {resolutions!r}")
    if not frames or not all(int(t) >= 2 for t in frames):
        raise ValueError(f"frames must be a non-empty list of video frame counts >= 2 (images are always 1 frame), got {frames!r}")
    if int(stride) < 1:
        raise ValueError(f"frame_stride must be >= 1, got {stride!r}")
