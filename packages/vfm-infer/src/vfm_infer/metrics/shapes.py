"""``shapes``: prompt adherence for the demo's domain, captions "a <colour> <circle|square> moving <direction>".

Per video, from the decoded RGB frames alone (no model): the background is each frame's median
colour; pixels farther than ``foreground_threshold`` from it are foreground, and the largest
4-connected foreground region of each frame is the shape. Then

- flatness: RMS distance of the background pixels (those not within 1/16 of the frame's side of
  any foreground pixel) to the background colour (0-255 scale; None without any), and they are most
  of the frame;
- colour: the shape pixels' mean colour, named by the nearest palette colour;
- motion: the least-squares slope of the shape's centroid over the frames, named by its larger
  axis (right = +x, down = +y) when it moves at least ``min_motion`` of the frame's side;
- one shape: present in most frames, smaller than 40% of the frame, with at most a tenth of the
  foreground outside it;
- shape: circle or square from how much of its bounding box the region fills (informational).

Colour, motion and shape count as matching the prompt only when a shape is seen at all (present in
most frames, smaller than 40% of the frame): noise's largest blob has a colour and a drift too.

The palette is the demo's (``vfm_curator.synth.COLOURS``; a test keeps the two equal).
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any, Mapping, Sequence

import numpy as np

from vfm_infer.metrics.base import EvalItem, Metric, MetricResult

PALETTE = {
    "red": (220, 40, 40),
    "green": (40, 190, 70),
    "blue": (50, 80, 230),
    "yellow": (235, 215, 50),
    "white": (245, 245, 245),
}
DIRECTIONS = ("right", "left", "down", "up")
PROMPT = re.compile(r"\b(?P<colour>[a-z]+) (?P<shape>circle|square) moving (?P<direction>right|left|down|up)\b")


def parse_prompt(prompt: str) -> dict[str, str] | None:
    """{"colour", "shape", "direction"} of a demo caption, or None if the prompt is not one."""
    match = PROMPT.search(prompt.lower())
    return match.groupdict() if match else None


def largest_region(mask: np.ndarray) -> np.ndarray:
    """The largest 4-connected True region of a (H, W) bool mask (all False if there is none)."""
    seen = np.zeros_like(mask)
    best: list[tuple[int, int]] = []
    h, w = mask.shape
    for start in zip(*np.nonzero(mask)):
        if seen[start]:
            continue
        seen[start] = True
        region, queue = [], deque([start])
        while queue:
            y, x = queue.popleft()
            region.append((y, x))
            for ny, nx in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
                if 0 <= ny < h and 0 <= nx < w and mask[ny, nx] and not seen[ny, nx]:
                    seen[ny, nx] = True
                    queue.append((ny, nx))
        if len(region) > len(best):
            best = region
    out = np.zeros_like(mask)
    if best:
        ys, xs = zip(*best)
        out[list(ys), list(xs)] = True
    return out


def dilate(mask: np.ndarray, radius: int) -> np.ndarray:
    """A (H, W) bool mask grown by ``radius`` pixels (a square neighbourhood)."""
    out = mask.copy()
    h, w = mask.shape
    for dy in range(-radius, radius + 1):
        for dx in range(-radius, radius + 1):
            shifted = np.zeros_like(mask)
            shifted[max(dy, 0) : h + min(dy, 0), max(dx, 0) : w + min(dx, 0)] = mask[max(-dy, 0) : h - max(dy, 0), max(-dx, 0) : w - max(dx, 0)]
            out |= shifted
    return out


class ShapesAdherence(Metric):
    """Background flatness, shape colour and motion direction of each video against its prompt."""

    name = "shapes"
    #: what ``vfm eval`` shows per video
    columns = ("prompt", "background_rms", "flat", "colour", "colour_ok", "direction", "direction_ok", "shape", "shape_ok",
               "single_shape")

    def __init__(self, foreground_threshold: float = 60.0, flat_rms: float = 8.0, min_motion: float = 0.1,
                 min_area: int = 4, palette: Mapping[str, Sequence[int]] | None = None) -> None:
        if foreground_threshold <= 0 or flat_rms <= 0 or min_motion < 0 or min_area < 1:
            raise ValueError("shapes metric needs foreground_threshold > 0, flat_rms > 0, min_motion >= 0 and min_area >= 1; "
                             f"got {foreground_threshold}, {flat_rms}, {min_motion}, {min_area}")
        self.foreground_threshold, self.flat_rms = float(foreground_threshold), float(flat_rms)
        self.min_motion, self.min_area = float(min_motion), int(min_area)
        self.palette = {k: np.asarray(v, dtype=np.float32) for k, v in (palette or PALETTE).items()}

    def analyse(self, frames: np.ndarray) -> dict[str, Any]:
        """What the video shows, independent of any prompt."""
        if frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"expected frames (T, H, W, 3), got shape {frames.shape}")
        video = frames.astype(np.float32)
        t, h, w, _ = video.shape
        background_sq, background_n, shape_pixels, stray, centroids, fills, areas = 0.0, 0, [], [], [], [], []
        for i, frame in enumerate(video):
            colour = np.median(frame.reshape(-1, 3), axis=0)
            dist = np.linalg.norm(frame - colour, axis=-1)  # (H, W)
            fg = dist > self.foreground_threshold
            # the background: away from any foreground (a resized shape's soft edge is not noise)
            background = ~dilate(fg, max(1, round(min(h, w) / 16)))
            background_sq += float((dist[background] ** 2).sum())
            background_n += int(background.sum())
            region = largest_region(fg)
            area = int(region.sum())
            stray.append((fg.sum() - area) / max(int(fg.sum()), 1))
            areas.append(area / (h * w))
            if area < self.min_area:
                continue
            ys, xs = np.nonzero(region)
            shape_pixels.append(frame[region])
            centroids.append((i, xs.mean(), ys.mean()))
            fills.append(area / ((ys.max() - ys.min() + 1) * (xs.max() - xs.min() + 1)))
        out: dict[str, Any] = {
            # None, not 0 (the flattest value), when no pixel is background: there was nothing to measure
            "background_rms": round((background_sq / background_n) ** 0.5, 2) if background_n else None,
            "background_fraction": round(background_n / (t * h * w), 3),
            "shape_frames": len(centroids),
            "shape_area": round(float(np.mean(areas)), 4),
            "stray_foreground": round(float(np.mean(stray)), 3),
            "colour": None, "colour_rgb": None, "direction": None, "displacement": None, "shape": None,
        }
        if shape_pixels:
            rgb = np.concatenate(shape_pixels).mean(0)
            out["colour_rgb"] = [round(float(v), 1) for v in rgb]
            out["colour"] = min(self.palette, key=lambda k: float(np.linalg.norm(self.palette[k] - rgb)))
            out["shape"] = "square" if float(np.mean(fills)) >= 0.88 else "circle"
        if len(centroids) >= 2:
            idx, cx, cy = (np.asarray(v, dtype=np.float64) for v in zip(*centroids))
            span = float(idx.max() - idx.min())
            dx = np.polyfit(idx, cx, 1)[0] * span / w if span else 0.0  # displacement as a fraction of the side
            dy = np.polyfit(idx, cy, 1)[0] * span / h if span else 0.0
            out["displacement"] = [round(float(dx), 3), round(float(dy), 3)]
            if max(abs(dx), abs(dy)) >= self.min_motion:
                out["direction"] = ("right" if dx > 0 else "left") if abs(dx) >= abs(dy) else ("down" if dy > 0 else "up")
        return out

    def score(self, item: EvalItem) -> dict[str, Any]:
        """One row: the prompt, what the video shows, and whether each part matches."""
        seen = self.analyse(item.frames)
        want = parse_prompt(item.prompt)
        row: dict[str, Any] = {"prompt": item.prompt, "parsed": want is not None, **seen}
        # flat: most of the frame is background, and that background is one colour
        row["flat"] = (seen["background_rms"] is not None and seen["background_rms"] <= self.flat_rms
                       and seen["background_fraction"] >= 0.5)
        # A shape: present in most frames and not most of the frame. Without one, the "shape" is noise's
        # largest blob and its colour, motion and form are no evidence of adherence: they do not count.
        shape_seen = seen["shape_frames"] * 2 > len(item.frames) and seen["shape_area"] <= 0.4
        # One shape: a shape, and little foreground outside it.
        row["single_shape"] = shape_seen and seen["stray_foreground"] <= 0.1
        for part in ("colour", "direction", "shape"):
            row[f"{part}_ok"] = None if want is None else (shape_seen and seen[part] == want[part])
        if want is None:  # not scored (a prompt that is no demo caption): no check passed or failed, only what it shows
            row["flat"] = row["single_shape"] = None
        return row

    def evaluate(self, items: Sequence[EvalItem]) -> MetricResult:
        rows = [self.score(item) for item in items]
        scored = [r for r in rows if r["parsed"]]
        count = lambda key: sum(bool(r[key]) for r in scored)  # noqa: E731
        measured = [r["background_rms"] for r in rows if r["background_rms"] is not None]
        summary = {
            "videos": len(rows),
            "scored": len(scored),
            "colour_correct": count("colour_ok"),
            "motion_correct": count("direction_ok"),
            "shape_correct": count("shape_ok"),
            "flat_background": count("flat"),
            "single_shape": count("single_shape"),
            # what the caption asks for: a flat background and one shape of the named colour moving the named way
            "all_correct": sum(bool(r["colour_ok"] and r["direction_ok"] and r["flat"] and r["single_shape"]) for r in scored),
            # over the videos that have background pixels; None when none has
            "mean_background_rms": round(float(np.mean(measured)), 2) if measured else None,
        }
        notes = []
        if len(scored) < len(rows):
            first = next(item.prompt for item, row in zip(items, rows) if not row["parsed"])
            notes.append(f"{len(rows) - len(scored)} of {len(rows)} prompts are not demo captions, so their videos "
                         f"are not scored (first: {first!r}; accepted: '<colour> <circle|square> moving "
                         f"<right|left|down|up>', colours {', '.join(PALETTE)})")
        return MetricResult(rows, summary, notes)
