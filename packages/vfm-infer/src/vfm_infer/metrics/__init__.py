"""Metrics of generated videos: a plugin kind (``vfm_infer_register_metrics``) with one interface.

Built-in, registered through that same hook: ``shapes``, prompt adherence for the demo's captions
("a red circle moving right"); ``clip-score``, frames against prompt by a local CLIP / SigLIP model;
``fvd``, Fréchet Video Distance to a folder of real videos with local I3D weights.
"""

from vfm_infer.metrics.base import EvalItem, Metric, MetricResult, MetricWarning

__all__ = ["EvalItem", "Metric", "MetricResult", "MetricWarning"]
