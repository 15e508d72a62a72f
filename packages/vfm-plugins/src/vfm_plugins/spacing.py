"""Evenly spaced indices (the frames a contact sheet, a preview sheet, a metric or a captioner picks from
a video): one rule, so every package picks the same frames."""

from __future__ import annotations


def evenly_spaced(count: int, wanted: int | None) -> list[int]:
    """Indices of ``wanted`` items spread evenly over ``count`` (the first and the last included), rounded
    half to even as ``numpy.linspace(0, count - 1, wanted).round()`` rounds them; all ``count`` when
    ``wanted`` is None or at least ``count``. ``wanted = 1`` is the first item.

    No two picks are the same: with ``wanted < count`` the spacing is at least 1."""
    if wanted is None or wanted >= count:
        return list(range(count))
    if wanted <= 0:
        raise ValueError(f"evenly_spaced needs wanted >= 1 (or None: all), got {wanted}")
    if wanted == 1:
        return [0]
    step = (count - 1) / (wanted - 1)  # numpy.linspace's step: the same floats, so the same roundings
    return [round(i * step) for i in range(wanted - 1)] + [count - 1]
