"""Metrics of generated videos: a plugin kind (``vfm_infer_register_metrics``) with one interface.

Built-in: ``shapes``, prompt adherence for the demo's captions ("a red circle moving right"). A
metric over sets of videos (FVD against reference videos with local I3D weights, CLIP score with
a local CLIP checkpoint) implements the same :class:`Metric` and registers through the same hook.
"""

from vfm_infer.metrics.base import EvalItem, Metric, MetricResult

__all__ = ["EvalItem", "Metric", "MetricResult"]
