"""Figures for ``report.html``: numbers with units, and charts as inline SVG (no script, no CDN).

Every text that reaches the page goes through :func:`html.escape` here; the callers pass plain values.
"""

from __future__ import annotations

import html
import math

e = html.escape


def duration(seconds: float) -> str:
    """``42.0 s``, ``23.5 min``, ``2 h 05 min``."""
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    hours, minutes = divmod(int(round(seconds / 60)), 60)
    return f"{hours} h {minutes:02d} min"


def size(num_bytes: float) -> str:
    """``812 KB``, ``45.6 MB``, ``1.23 GB`` (powers of 1000)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.{2 if unit == 'GB' else 1 if unit == 'MB' else 0}f} {unit}"
    return f"{int(num_bytes)} B"


def number(value: float, digits: int = 3) -> str:
    """A score for a table cell: ``0.0123``, ``27.4``, ``1.2e+03``."""
    if value != value:
        return "nan"
    return f"{value:.{digits}g}"


def histogram(values: list[float], *, title: str, unit: str = "", bins: int = 12) -> str:
    """An SVG histogram of ``values`` with its count, range and unit written on it."""
    width, height, pad = 320, 150, 24
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    head = f"<figure class=\"chart\"><figcaption>{e(title)} <span class=\"muted\">({len(finite)} clips)</span></figcaption>"
    if not finite:
        return head + "<p class=\"muted\">no values</p></figure>"
    lo, hi = min(finite), max(finite)
    if hi == lo:
        hi = lo + (abs(lo) or 1.0) * 1e-3
    counts = [0] * bins
    for v in finite:
        counts[min(bins - 1, int((v - lo) / (hi - lo) * bins))] += 1
    top = max(counts)
    bar_w = (width - 2 * pad) / bins
    bars = []
    for i, c in enumerate(counts):
        h = (height - 2 * pad) * c / top
        x0, x1 = lo + i * (hi - lo) / bins, lo + (i + 1) * (hi - lo) / bins
        bars.append(
            f"<rect x=\"{pad + i * bar_w:.1f}\" y=\"{height - pad - h:.1f}\" width=\"{max(bar_w - 1, 1):.1f}\" "
            f"height=\"{h:.1f}\"><title>{e(number(x0))} to {e(number(x1))} {e(unit)}: {c}</title></rect>"
        )
    suffix = f" {unit}" if unit else ""
    svg = (
        f"<svg viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" role=\"img\" "
        f"aria-label=\"{e(title)}\">{''.join(bars)}"
        f"<line x1=\"{pad}\" y1=\"{height - pad}\" x2=\"{width - pad}\" y2=\"{height - pad}\" class=\"axis\"/>"
        f"<text x=\"{pad}\" y=\"{height - 6}\">{e(number(lo))}{e(suffix)}</text>"
        f"<text x=\"{width - pad}\" y=\"{height - 6}\" text-anchor=\"end\">{e(number(hi))}{e(suffix)}</text>"
        f"<text x=\"{pad}\" y=\"{pad - 8}\">{top} max</text></svg>"
    )
    return head + svg + "</figure>"


def bars(items: list[tuple[str, float, str]], *, title: str, unit: str) -> str:
    """A horizontal SVG bar chart of ``(label, value, note)`` rows (the note is written after the bar)."""
    head = f"<figure class=\"chart wide\"><figcaption>{e(title)}</figcaption>"
    if not items:
        return head + "<p class=\"muted\">no timings recorded</p></figure>"
    row_h, label_w, bar_max, width = 22, 90, 300, 640
    top = max(v for _, v, _ in items) or 1.0
    rows = []
    for i, (label, value, note) in enumerate(items):
        y = 6 + i * row_h
        w = bar_max * value / top
        text = f"{number(value)} {unit}" + (f" · {note}" if note else "")
        rows.append(
            f"<text x=\"{label_w - 6}\" y=\"{y + 14}\" text-anchor=\"end\">{e(label)}</text>"
            f"<rect x=\"{label_w}\" y=\"{y}\" width=\"{max(w, 1):.1f}\" height=\"{row_h - 6}\"/>"
            f"<text x=\"{label_w + max(w, 1) + 6:.1f}\" y=\"{y + 14}\">{e(text)}</text>"
        )
    height = 12 + len(items) * row_h
    return (head + f"<svg viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" role=\"img\" "
            f"aria-label=\"{e(title)}\">{''.join(rows)}</svg></figure>")
