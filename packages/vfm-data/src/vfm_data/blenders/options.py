"""Checks of blender options, run when the blender is built (``make_loader``): a value of the wrong
type or range is named with the option and what is accepted, instead of a comparison's bare
``TypeError`` at the first batch or a batch size of ``"4"`` or ``True`` taken silently."""

from __future__ import annotations

from typing import Any

from vfm_data.numbers_rule import is_finite_number, is_whole_number


class BlenderOptionError(ValueError):
    """A blender option whose value the blender cannot use: names the blender, the option, the value
    and what is accepted."""

    def __init__(self, blender: str, option: str, value: Any, accepted: str) -> None:
        self.blender, self.option, self.value, self.accepted = blender, option, value, accepted
        super().__init__(f"blender {blender!r}: {option}={value!r} is not accepted; accepted: {accepted}")

    def __reduce__(self):  # rebuilt from its fields, so it crosses processes (loader workers)
        return type(self), (self.blender, self.option, self.value, self.accepted)


def _is_list(value: Any) -> bool:
    # a string is a sequence too: durations="12" would be the frame counts "1" and "2"
    return isinstance(value, (list, tuple))


def positive_int(blender: str, option: str, value: Any, accepted: str) -> int:
    if not is_whole_number(value) or value < 1:
        raise BlenderOptionError(blender, option, value, accepted)
    return int(value)


def positive_ints(blender: str, option: str, value: Any, accepted: str) -> list[int]:
    """A non-empty list of positive integers."""
    if not _is_list(value) or not value or not all(is_whole_number(v) and v >= 1 for v in value):
        raise BlenderOptionError(blender, option, value, accepted)
    return [int(v) for v in value]


def weight_schedule(blender: str, option: str, value: Any) -> list[tuple[int, list[float]]]:
    """``[(samples, [weight, ...]), ...]``: samples whole numbers >= 0 increasing, weights numbers >= 0
    with a positive sum, every milestone with as many weights as the first."""
    accepted = ("a non-empty list of [samples, [weight per dataset, ...]] milestones, samples whole numbers >= 0 "
                "in increasing order, weights numbers >= 0 with a positive sum, e.g. [[0, [1.0, 0.0]], [10000, [0.5, 0.5]]]")
    if not _is_list(value) or not value:
        raise BlenderOptionError(blender, option, value, accepted)
    out: list[tuple[int, list[float]]] = []
    for i, milestone in enumerate(value):
        where = f"{option}[{i}]"
        if not _is_list(milestone) or len(milestone) != 2:
            raise BlenderOptionError(blender, where, milestone, accepted)
        at, weights = milestone
        if not is_whole_number(at) or at < 0:
            raise BlenderOptionError(blender, f"{where} samples", at, accepted)
        if not _is_list(weights) or not weights or not all(is_finite_number(w) and w >= 0 for w in weights) or sum(weights) <= 0:
            raise BlenderOptionError(blender, f"{where} weights", weights, accepted)
        if out and at < out[-1][0]:
            raise BlenderOptionError(blender, f"{where} samples", at, f"{accepted} (the milestone before is at {out[-1][0]})")
        if out and len(weights) != len(out[0][1]):
            raise BlenderOptionError(blender, f"{where} weights", weights,
                                     f"as many weights as the first milestone ({len(out[0][1])}), one per dataset of the blend")
        out.append((int(at), [float(w) for w in weights]))
    return out
