"""Where shot detection used to live; kept so existing imports work. The detectors are in
:mod:`vfm_curator.shot_detectors` (a plugin kind), the span helpers in
:mod:`vfm_curator.shot_detectors.spans`."""

from __future__ import annotations

from vfm_curator.shot_detectors.content import FrameScorer, content_scores, detect_cuts
from vfm_curator.shot_detectors.spans import fixed_stride, limit_lengths, motion_between, shots_from_cuts

__all__ = ["FrameScorer", "content_scores", "detect_cuts", "fixed_stride", "limit_lengths", "motion_between",
           "shots_from_cuts"]
