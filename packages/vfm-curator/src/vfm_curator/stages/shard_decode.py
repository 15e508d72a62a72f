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
#: ``windows = 0`` keeps a clip's frames up to this many bytes (RGB at the bucket's size): a long
#: clip gives the windows that fit in it, not a worker out of memory (about 2,700 frames at 256x256;
#: stacking them briefly doubles it, within the stage's 1024 MB). One window more is decoded to tell
#: a clip cut short by it (``ShardTask.cut_short``, counted in the run's summary).
ALL_WINDOWS_BYTES = 1 << 29


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


def choose_resolution(height: int, width: int, resolutions: Sequence[Sequence[int]],
                      max_upscale: float | None = None) -> tuple[int, int]:
    """The (H, W) whose aspect ratio is closest to the clip's (in log space, so 2:1 and 1:2 are
    equally far from 1:1; the first listed wins a tie). Among resolutions of that aspect ratio
    (multi-resolution buckets, e.g. 128x128 and 256x256) the largest the clip fills without enlarging it more than
    ``max_upscale`` (None: not at all) wins, else the smallest, so a small clip is not blown up when
    a smaller bucket of its shape is there."""
    allowed = 1.0 if max_upscale is None else float(max_upscale)
    ratio = math.log(width / height)
    shape = lambda hw: math.log(hw[1] / hw[0])  # noqa: E731
    distances = [abs(shape(hw) - ratio) for hw in resolutions]
    # a tie (4:3 is exactly as far from 1:1 as from 16:9, up to float rounding): the first listed shape
    nearest = shape(next(hw for hw, d in zip(resolutions, distances) if d - min(distances) < 1e-9))
    same = [hw for hw in resolutions if abs(shape(hw) - nearest) < 1e-9]
    fits = [hw for hw in same if upscale_factor(height, width, hw[0], hw[1]) <= allowed + 1e-9]
    best = max(fits, key=lambda hw: hw[0] * hw[1]) if fits else min(same, key=lambda hw: hw[0] * hw[1])
    return int(best[0]), int(best[1])


def upscale_factor(height: int, width: int, target_h: int, target_w: int) -> float:
    """How much a (height, width) frame is enlarged to cover (target_h, target_w); <= 1 is none."""
    return max(target_h / height, target_w / width)


def crop_fraction(height: int, width: int, target_h: int, target_w: int) -> float:
    """The part of the frame's area the centre crop cuts away once it is scaled to cover the
    target (0: same aspect ratio; a 16:9 frame in a square bucket loses 0.4375)."""
    sh, sw = cover_size(height, width, target_h, target_w)
    return 1.0 - (target_h * target_w) / (sh * sw)


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
    """Sets ``task.frames`` ((N*T, H, W, 3) uint8: N windows of T frames), ``task.window`` (T),
    ``task.stride``, ``task.bucket``, ``task.modality``, ``task.size``, ``task.upscale`` and ``task.crop``.

    ``resolutions``: the (H, W) buckets; a clip goes to the one nearest its aspect ratio.
    ``frames``: the video frame counts (each one the tokenizer accepts); a clip gets the largest it
    can fill with every ``frame_stride``-th frame, and ``windows`` consecutive windows of that count
    become samples (0: as many as the clip fills, up to :data:`ALL_WINDOWS_BYTES` of frames, so a
    long clip is not cut to its first frames; one filling more sets ``task.cut_short``; 1: the first only). Images and 1-frame clips become 1-frame samples in an ``HxWx1`` bucket. A video too short for the smallest count fails with the counts it needed.
    ``max_upscale`` (a factor >= 1) fails a clip its bucket would enlarge more than that
    (``too-small``); ``max_crop`` (a fraction in [0, 1)) fails a clip whose centre crop would cut
    more of its frame than that (``aspect-mismatch``). Both default to None: no limit.
    """

    name = "shard_decode"
    resources = Resources(cpus=1.0, memory_mb=1024)
    defaults = {"resolutions": [[256, 256]], "frames": [17], "frame_stride": 1, "windows": 0, "max_upscale": None,
                "max_crop": None}

    def __init__(self, **options) -> None:
        super().__init__(**options)
        check_buckets(self.opt["resolutions"], self.opt["frames"], self.opt["frame_stride"])
        check_windows(self.opt["windows"])
        check_resize_limits(self.opt["max_upscale"], self.opt["max_crop"])

    def check_limits(self, height: int, width: int, bucket_h: int, bucket_w: int) -> tuple[float, float]:
        """Refuse a clip its bucket would enlarge or crop beyond ``max_upscale`` / ``max_crop``;
        else ``(upscale_factor, crop_fraction)`` of it."""
        size, bucket = f"{height}x{width}", f"{bucket_h}x{bucket_w}"
        factor, crop = upscale_factor(height, width, bucket_h, bucket_w), crop_fraction(height, width, bucket_h, bucket_w)
        limit = self.opt["max_upscale"]
        if limit is not None and factor > float(limit) + 1e-9:
            raise LimitError(
                f"too small: the {size} (HxW) clip would be upscaled {factor:.2f}x to fill its bucket {bucket}, more than "
                f"max_upscale = {limit}; add a smaller resolution of its shape or raise max_upscale", kind="too-small",
            )
        limit = self.opt["max_crop"]
        if limit is not None and crop > float(limit) + 1e-9:
            raise LimitError(
                f"aspect ratio: the centre crop of the {size} (HxW) clip to its nearest bucket {bucket} would cut "
                f"{crop:.0%} of the frame, more than max_crop = {limit}; add a resolution near its aspect ratio "
                f"(width/height {width / height:.2f}) or raise max_crop", kind="aspect-mismatch",
            )
        return factor, crop

    def process_one(self, task: ShardTask) -> None:
        info = probe(task.path)
        task.size = (info.height, info.width)
        height, width = choose_resolution(info.height, info.width, self.opt["resolutions"], self.opt["max_upscale"])
        task.upscale, task.crop = self.check_limits(info.height, info.width, height, width)
        stride = int(self.opt["frame_stride"])
        is_image = Path(task.path).suffix.lower() in IMAGE_EXTENSIONS
        windows, longest = int(self.opt["windows"]), max(self.opt["frames"])
        cap = max(longest, ALL_WINDOWS_BYTES // (height * width * 3))  # frames windows = 0 keeps at most
        # windows = 0 decodes one window past the cap: a clip that fills more windows than it keeps is told
        most = longest * windows if windows else cap + longest
        frames = load_frames(task.path, height, width, 1 if is_image else most, stride)
        if is_image or len(frames) == 1 and info.frames <= 1:
            task.modality, count, windows = "image", 1, 1
        else:
            count = choose_frames(len(frames), self.opt["frames"])
            if count is None:  # the clip is fine, the configured buckets are too long for it
                raise LimitError(
                    f"too short: {len(frames)} frame(s) at stride {stride}; the shortest bucket takes "
                    f"{min(self.opt['frames'])} (frames = {list(self.opt['frames'])})", kind="too-short",
                )
            task.modality = "video"
        fits = len(frames) // count
        if not windows:
            task.cut_short = fits > cap // count
            windows = min(fits, cap // count)
        task.window, task.stride = count, stride
        task.frames = np.ascontiguousarray(frames[: count * min(windows, fits)])
        task.bucket = Bucket(height, width, count).name


def check_windows(windows) -> None:
    """``windows``: a whole number >= 0 (0: every window the clip fills)."""
    if not isinstance(windows, int) or isinstance(windows, bool) or windows < 0:
        raise ValueError(f"windows must be a whole number >= 0 (samples per clip: 0 = every window of the frame count "
                         f"that the clip fills, 1 = its first frames only), got {windows!r}")


def check_buckets(resolutions, frames, stride) -> None:
    """Clear errors for bucket options that cannot work (a TOML typo such as ``frames = 17`` or
    ``resolutions = [256]`` included)."""
    def whole(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    pairs = isinstance(resolutions, (list, tuple)) and resolutions and all(
        isinstance(r, (list, tuple)) and len(r) == 2 and all(whole(v) and v > 0 for v in r) for r in resolutions)
    if not pairs:
        raise ValueError(f"resolutions must be a non-empty list of [height, width] pairs of whole numbers > 0, "
                         f"e.g. [[256, 256], [144, 256]]; got {resolutions!r}")
    if not (isinstance(frames, (list, tuple)) and frames and all(whole(t) and t >= 2 for t in frames)):
        raise ValueError(f"frames must be a non-empty list of video frame counts >= 2, whole numbers (images are always "
                         f"1 frame), e.g. [17] or [9, 17]; got {frames!r}")
    if not whole(stride) or stride < 1:
        raise ValueError(f"frame_stride must be a whole number >= 1, got {stride!r}")


def check_resize_limits(max_upscale, max_crop) -> None:
    """``max_upscale``: None or a number >= 1; ``max_crop``: None or a fraction in [0, 1)."""
    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    if max_upscale is not None and not (number(max_upscale) and max_upscale >= 1):
        raise ValueError(f"max_upscale must be a factor >= 1 (1: never enlarge a clip) or unset for no limit, got {max_upscale!r}")
    if max_crop is not None and not (number(max_crop) and 0 <= max_crop < 1):
        raise ValueError(f"max_crop must be a fraction of the frame in [0, 1) (0: never crop) or unset for no limit, got {max_crop!r}")
