"""``split``: cut a video into clips by content-based shot detection or a fixed stride."""

from __future__ import annotations

from vfm_curator.stages.base import LimitError, Resources, Stage
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

    def check_options(self) -> None:
        if self.opt["method"] not in ("content", "stride"):
            raise ValueError(f"stage 'split': unknown method {self.opt['method']!r}; accepted: content, stride")
        self.option_range("threshold", lo=0)
        self.option_range("adaptive_ratio", lo=0)
        self.option_range("min_shot_s", lo=0)
        self.option_range("stride_s", lo=0, lo_open=True)
        self.option_range("min_clip_s", lo=0)
        self.option_range("max_clip_s", lo=0, lo_open=True)
        if self.opt["max_clip_s"] < self.opt["min_clip_s"]:
            raise ValueError(f"stage 'split': max_clip_s = {self.opt['max_clip_s']} is under min_clip_s = "
                             f"{self.opt['min_clip_s']}; accepted: max_clip_s >= min_clip_s")

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
            raise LimitError(f"too short: {task.duration:.2f} s is under min_clip_s={self.opt['min_clip_s']}", kind="too-short")
        task.clips = [make_clip(task, a, b) for a, b in limit_lengths(spans, min_len, max_len)]
        if not task.clips:
            longest = max((b - a for a, b in spans), default=0) / fps if fps > 0 else 0.0
            raise LimitError(f"no clip: {len(spans)} shot(s) ({len(spans) - 1} cuts in {n} frames), the longest "
                             f"{longest:.2f} s, all under min_clip_s={self.opt['min_clip_s']}")


def make_clip(task: VideoTask, start: int, end: int) -> Clip:
    """A clip of frames ``[start, end)`` with its times and deterministic id."""
    times = task.times
    frame_s = 1.0 / float(task.meta["fps"]) if task.meta.get("fps") else 0.0
    end_s = float(times[end]) if end < len(times) else float(times[-1]) + frame_s
    return Clip(start=start, end=end, start_s=float(times[start]), end_s=end_s, id=clip_id(task.source, start, end))
