"""What counts as a whole number and as a finite number in vfm_data's settings (loader options,
blender options, blend weights): one rule, so a value one check takes another does not refuse."""

from __future__ import annotations

import math
import numbers
from typing import Any


def is_whole_number(value: Any) -> bool:
    """An integer, numpy's too; not a bool."""
    # a bool is an int to Python, but batch_size=true meaning 1 is a typo, not a request
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    """A real number, numpy's too; not a bool, NaN or an infinity."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def is_blend_weight(value: Any) -> bool:
    """A blend entry's weight: a positive finite number (relative: weights need not sum to 1)."""
    return is_finite_number(value) and value > 0
