"""``split``: cut a video into clips by content-based shot detection or a fixed stride."""

from __future__ import annotations

from vfm_curator.stages.base import InputError, Resources, Stage
from vfm_curator.stages.shot_detection import detect_cuts, fixed_stride, limit_lengths, shots_from_cuts
from vfm_curator.tasks import Clip, VideoTask, clip_id


class SplitStage(Stage):
    """Fills ``task.clips`` with spans of at least ``min_clip_s`` and at most ``max_clip_s`` seconds.

    ``method="content"``: shot boundaries from the decode stage's per-frame HSV change scores (see
    :mod:`shot_detection`); ``method="stride"``: spans of ``stride_s`` seconds.
    """

    name = "split"
    resources = Resources(cpus=0.5, memory_mb=512)
    defaults = {
        "method": "content",
        "threshold": 27.0,
        "adaptive_ratio": 0.0,
        "min_shot_s": 0.25,
        "stride_s": 5.0,
        "min_clip_s": 1.0,
        "max_clip_s": 20.0,
    }

    def process_one(self, task: VideoTask) -> None:
        n, fps = len(task.times), float(task.meta["fps"])
        if self.opt["method"] == "content":
            cuts = detect_cuts(
                task.cut_scores,
                threshold=float(self.opt["threshold"]),
                min_shot=max(1, round(float(self.opt["min_shot_s"]) * fps)),
                adaptive_ratio=float(self.opt["adaptive_ratio"]),
            )
            spans = shots_from_cuts(cuts, n)
            task.meta["cuts"] = cuts
        elif self.opt["method"] == "stride":
            spans = fixed_stride(n, round(float(self.opt["stride_s"]) * fps))
        else:
            raise ValueError(f"unknown split method {self.opt['method']!r}; available: content, stride")
        min_len = max(1, round(float(self.opt["min_clip_s"]) * fps))
        max_len = max(min_len, round(float(self.opt["max_clip_s"]) * fps))
        if n < min_len:
            raise InputError(f"too short: {task.duration:.2f} s is under min_clip_s={self.opt['min_clip_s']}")
        task.clips = [make_clip(task, a, b) for a, b in limit_lengths(spans, min_len, max_len)]


def make_clip(task: VideoTask, start: int, end: int) -> Clip:
    """A clip of frames ``[start, end)`` with its times and deterministic id."""
    times = task.times
    frame_s = 1.0 / float(task.meta["fps"]) if task.meta.get("fps") else 0.0
    end_s = float(times[end]) if end < len(times) else float(times[-1]) + frame_s
    return Clip(start=start, end=end, start_s=float(times[start]), end_s=end_s, id=clip_id(task.source, start, end))
