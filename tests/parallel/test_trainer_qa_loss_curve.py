"""The loss curve of a run with a skipped non-finite step: the smoothed curve goes on around it (a
trailing mean over the finite losses) instead of vanishing for a whole window."""

from __future__ import annotations

import math

import pytest

from vfm_parallel.trainer.metrics import smoothed


def test_the_smoothed_loss_skips_a_nan_step_instead_of_blanking_the_window():
    losses = [4.0, 2.0, float("nan"), 2.0, 4.0, float("inf")]
    assert smoothed(losses, 3) == pytest.approx([4.0, 3.0, 3.0, 2.0, 3.0, 3.0])
    assert math.isnan(smoothed([float("nan")], 2)[0])  # nothing finite to average

