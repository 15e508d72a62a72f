"""The vfm_infer hook: a metric of generated videos."""

import numpy as np

from vfm_infer.metrics.base import Metric, MetricResult
from vfm_infer.plugins import hookimpl


class MeanLevel(Metric):
    """The mean pixel value of each video, times ``scale``."""

    name = "kinds-level"

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = float(scale)

    def evaluate(self, items):
        per_video = [{"level": float(item.frames.mean()) * self.scale} for item in items]
        return MetricResult(per_video=per_video, summary={"mean_level": float(np.mean([v["level"] for v in per_video]))})


@hookimpl
def vfm_infer_register_metrics(register):
    register("kinds-level", MeanLevel, description="mean pixel value")
