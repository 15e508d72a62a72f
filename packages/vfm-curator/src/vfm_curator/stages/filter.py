"""``filter``: drop clips by duration, resolution, motion and any registered score."""

from __future__ import annotations

import numpy as np

from vfm_curator.stages.base import LimitError, Resources, Stage
from vfm_curator.shot_detectors.spans import motion_between
from vfm_curator.tasks import Clip, VideoTask


def motion_score(task: VideoTask, start: int, end: int) -> float:
    """Mean absolute difference of consecutive downscaled grey frames in ``[start, end)``, in [0, 1]
    (from the decode stage's per-frame ``task.motion``)."""
    return motion_between(task.motion, start, end)


class FilterStage(Stage):
    """Every clip gets ``scores["motion"]`` (and one score per entry of ``scorers``); a clip outside
    the limits is kept in the task with ``rejected`` set (it is counted, not written).

    ``scorers`` is a list of ``{"name": <scorers entry>, "min": x, "max": y, "options": {...}}``;
    a scorer is a callable ``score(clip, task) -> float``.
    """

    name = "filter"
    resources = Resources(cpus=0.5, memory_mb=512)
    defaults = {
        "min_duration_s": 0.0,
        "max_duration_s": float("inf"),
        "min_width": 0,
        "min_height": 0,
        "min_motion": 0.0,
        "max_motion": float("inf"),
        "scorers": [],
    }

    def check_options(self) -> None:
        for lo, hi in (("min_duration_s", "max_duration_s"), ("min_motion", "max_motion")):
            self.option_range(lo, lo=0)
            self.option_range(hi, lo=0)
            if self.opt[hi] < self.opt[lo]:
                raise ValueError(f"stage 'filter': {hi} = {self.opt[hi]} is under {lo} = {self.opt[lo]}; accepted: {hi} >= {lo}")
        self.option_range("min_width", lo=0, integer=True)
        self.option_range("min_height", lo=0, integer=True)
        if not isinstance(self.opt["scorers"], list) or not all(isinstance(s, dict) and "name" in s for s in self.opt["scorers"]):
            raise ValueError(f"stage 'filter': scorers must be a list of tables with a 'name'; got {self.opt['scorers']!r}")

    def setup(self) -> None:
        from vfm_curator.plugins import host

        self.scorers = []
        for spec in self.opt["scorers"]:
            if "name" not in spec:
                raise ValueError(f"filter: a scorer needs a 'name'; got {spec!r}")
            scorer = host.build("scorers", spec["name"], spec.get("options"))
            if not callable(scorer):  # the filter calls scorer(clip, task): a plugin's `def score(...)` is never called
                entry = host.entry("scorers", spec["name"])
                raise TypeError(f"scorer {spec['name']!r} (from {entry.provider} {entry.version}): its instances are not "
                                f"callable; a scorer's class defines __call__(self, clip, task) -> float")
            self.scorers.append((spec["name"], scorer, float(spec.get("min", -np.inf)), float(spec.get("max", np.inf))))

    def process_one(self, task: VideoTask) -> None:
        for clip in task.clips:
            clip.scores["motion"] = motion_score(task, clip.start, clip.end)
            for name, scorer, _, _ in self.scorers:
                clip.scores[name] = float(scorer(clip, task))
            clip.rejected = self._why_rejected(clip)
        if task.clips and all(c.rejected is not None for c in task.clips):
            raise LimitError(f"all {len(task.clips)} clip(s) filtered out (first: {task.clips[0].rejected})", kind="all-filtered")

    def _why_rejected(self, clip: Clip) -> str | None:
        o = self.opt
        duration = clip.end_s - clip.start_s
        if not o["min_duration_s"] <= duration <= o["max_duration_s"]:
            return f"duration {duration:.2f} s outside [{o['min_duration_s']}, {o['max_duration_s']}]"
        if clip.width and (clip.width < o["min_width"] or clip.height < o["min_height"]):
            return f"resolution {clip.width}x{clip.height} under {o['min_width']}x{o['min_height']}"
        motion = clip.scores["motion"]
        if not o["min_motion"] <= motion <= o["max_motion"]:
            return f"motion {motion:.4f} outside [{o['min_motion']}, {o['max_motion']}]"
        for name, _, lo, hi in self.scorers:
            if not lo <= clip.scores[name] <= hi:
                return f"{name} {clip.scores[name]:.4f} outside [{lo}, {hi}]"
        return None


class MotionScorer:
    """The frame-difference motion score as a pluggable scorer (same as ``scores["motion"]``)."""

    def __call__(self, clip: Clip, task: VideoTask) -> float:
        return motion_score(task, clip.start, clip.end)
