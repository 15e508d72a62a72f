"""``split``: cut a video into clips with a registered shot detector, or at a fixed stride."""

from __future__ import annotations

import numpy as np

from vfm_curator.shot_detectors.base import checked_spans
from vfm_curator.shot_detectors.spans import fixed_stride, limit_lengths, split_at_pauses
from vfm_curator.stages.base import LimitError, Resources, Stage
from vfm_curator.tasks import Clip, VideoTask, clip_id
from vfm_plugins.text import counted

# Options of the ``content`` detector that the stage has always taken directly (older configs);
# each goes to the chosen detector when it has an option of that name.
DETECTOR_SHORTCUTS = ("threshold", "adaptive_ratio", "min_shot_s")


class SplitStage(Stage):
    """Fills ``task.clips`` with spans of at least ``min_clip_s`` and at most ``max_clip_s`` seconds.

    ``method``: a registered shot detector (``content``, ``adaptive``, ``transnetv2``, or a
    plugin's; see :mod:`vfm_curator.shot_detectors`) built with ``detector_options``, or
    ``"stride"``: spans of ``stride_s`` seconds. ``threshold``, ``adaptive_ratio`` and
    ``min_shot_s`` are shortcuts for the detector's options of those names (``None``: its default).
    Detectors that read frames (``transnetv2``) decode the video once more at their own size.
    """

    name = "split"
    resources = Resources(cpus=0.5, memory_mb=512)
    defaults = {
        "method": "content",
        "detector_options": {},
        "threshold": None,
        "adaptive_ratio": None,
        "min_shot_s": None,
        "stride_s": 5.0,
        "min_clip_s": 1.0,
        "max_clip_s": 20.0,
        "hwaccel": None,
    }

    def check_options(self) -> None:
        self.option_range("stride_s", lo=0, lo_open=True)
        self.option_range("min_clip_s", lo=0)
        self.option_range("max_clip_s", lo=0, lo_open=True)
        if self.opt["max_clip_s"] < self.opt["min_clip_s"]:
            raise ValueError(f"stage 'split': max_clip_s = {self.opt['max_clip_s']} is under min_clip_s = "
                             f"{self.opt['min_clip_s']}; accepted: max_clip_s >= min_clip_s")
        if self.opt["method"] == "stride":
            if self.opt["detector_options"]:
                raise ValueError("stage 'split': method 'stride' uses no shot detector, so detector_options must be "
                                 f"empty; got {self.opt['detector_options']!r} (the stride is stride_s)")
            self.detector = None
        else:
            self.detector = self._build_detector()

    def _build_detector(self):
        from vfm_curator.plugins import host
        from vfm_plugins import PluginLoadError, UnknownNameError

        method = self.opt["method"]
        try:
            cls = host.get("shot_detectors", method) if isinstance(method, str) else None
        except UnknownNameError:
            cls = None
        except PluginLoadError as exc:  # registered, but its plugin's target is broken: say so, not "unknown"
            raise ValueError(f"stage 'split': {exc}") from None
        if cls is None:
            names = ", ".join([*host.names("shot_detectors"), "stride"])
            raise ValueError(f"stage 'split': unknown method {method!r}; accepted: {names}")
        options = self.opt["detector_options"]
        if not isinstance(options, dict):
            raise ValueError(f"stage 'split': detector_options must be a table of options, got {options!r}")
        options = dict(options)
        for key in DETECTOR_SHORTCUTS:
            if self.opt[key] is None:
                continue
            if key not in cls.defaults:
                raise ValueError(f"stage 'split': option {key} does not apply to method {method!r}; "
                                 f"its options (detector_options): {', '.join(sorted(cls.defaults)) or '(none)'}")
            if key in options:
                raise ValueError(f"stage 'split': {key} is given twice (the option and detector_options.{key}); "
                                 "give one")
            options[key] = self.opt[key]
        try:
            return cls(**options)
        except ValueError as exc:
            raise ValueError(f"stage 'split': {exc}") from exc

    @property
    def configured_resources(self) -> Resources | None:
        """What a worker needs with this detector, when it differs from the class's (a network)."""
        if self.detector is None or self.detector.frame_size is None:
            return None
        return Resources(cpus=1.0, gpus=1.0 if getattr(self.detector, "uses_gpu", False) else 0.0, memory_mb=3072)

    def setup(self) -> None:
        if self.detector is not None:
            self.detector.setup()

    def process_one(self, task: VideoTask) -> None:
        n, fps = len(task.times), float(task.meta["fps"])
        if self.detector is None:
            spans = fixed_stride(n, round(float(self.opt["stride_s"]) * fps))
        else:
            found = checked_spans(self.detector, self.detector.spans(self._scores(task, n), fps=fps))
            spans = [(a, min(b, n)) for a, b in found if a < n]
            task.meta["cuts"] = [a for a, _ in spans[1:]]
        spans = split_at_pauses(spans, task.times)
        min_len = max(1, round(float(self.opt["min_clip_s"]) * fps))
        max_len = max(min_len, round(float(self.opt["max_clip_s"]) * fps))
        if n < min_len:
            raise LimitError(f"too short: {task.duration:.2f} s is under min_clip_s={self.opt['min_clip_s']}", kind="too-short")
        task.clips = [make_clip(task, a, b) for a, b in limit_lengths(spans, min_len, max_len)]
        if not task.clips:
            longest = max((b - a for a, b in spans), default=0) / fps if fps > 0 else 0.0
            raise LimitError(f"no clip: {counted(len(spans), 'shot')} ({counted(len(spans) - 1, 'cut')} in "
                             f"{counted(n, 'frame')}), the longest {longest:.2f} s, all under "
                             f"min_clip_s={self.opt['min_clip_s']}")

    def _scores(self, task: VideoTask, n: int) -> np.ndarray:
        """The detector's per-frame scores: the decode stage's content change, or its own pass over
        frames of its size (cut or padded to the decode stage's frame count, should a decoder differ)."""
        if self.detector.frame_size is None:
            return task.cut_scores
        from vfm_curator.io.video import iter_frames

        w, h = self.detector.frame_size
        frames = (frame for _, frame in iter_frames(task.source, width=w, height=h, hwaccel=self.opt["hwaccel"]))
        scores = np.asarray(self.detector.frame_scores(frames), np.float32)[:n]
        return np.pad(scores, (0, n - len(scores)))


def pause_before(task: VideoTask, i: int) -> bool:
    """Whether the recording paused between frames ``i - 1`` and ``i`` (decode's ``meta["pause_s"]``)."""
    limit = task.meta.get("pause_s")
    return limit is not None and 0 < i < len(task.times) and float(task.times[i] - task.times[i - 1]) > limit


def make_clip(task: VideoTask, start: int, end: int) -> Clip:
    """A clip of frames ``[start, end)`` with its times and deterministic id. It ends where the next
    frame starts, or one frame after its last one at the end of the video or before a pause."""
    times = task.times
    frame_s = 1.0 / float(task.meta["fps"]) if task.meta.get("fps") else 0.0
    end_s = float(times[end]) if end < len(times) and not pause_before(task, end) else float(times[end - 1]) + frame_s
    return Clip(start=start, end=end, start_s=float(times[start]), end_s=end_s, id=clip_id(task.source, start, end))

