"""The demo's input: short videos of moving shapes, several shots each, and a captioned manifest."""

from __future__ import annotations

import json
from itertools import product
from pathlib import Path

import numpy as np

# (shape, colour, direction) per video: distinct enough that the captions mean something.
SUBJECTS = list(product(("circle", "square"), ("red", "green", "blue", "yellow"), ("right", "left", "down", "up")))
#: A background closer than this (RGB distance) to the shape's colour is not used for it: a red
#: circle on the crimson background is hard to see, for a viewer and for a small model alike.
MIN_CONTRAST = 100.0


def backgrounds_for(colour: str) -> list[tuple[int, int, int]]:
    """The synthetic backgrounds that contrast with ``colour`` (at least three for every colour)."""
    from vfm_curator.synth import BACKGROUNDS, COLOURS

    shape = np.asarray(COLOURS[colour], dtype=float)
    return [bg for bg in BACKGROUNDS if np.linalg.norm(np.asarray(bg, dtype=float) - shape) >= MIN_CONTRAST]


def subjects_for(videos: int) -> list[tuple[str, str, str]]:
    """The (shape, colour, direction) of each of ``videos`` videos, all different: every
    ``stride``-th subject, spread over shapes, colours and directions. The stride is odd, so it
    shares no factor with the 32 subjects and ``videos`` of them never repeat one (an even stride,
    2 for 17 to 32 videos, gave 32 videos 16 captions twice)."""
    stride = (len(SUBJECTS) // videos + 1) | 1
    return [SUBJECTS[i * stride % len(SUBJECTS)] for i in range(videos)]


def make_inputs(folder: Path, videos: int, *, shots: int = 3, frames_per_shot: int = 24, size: int = 64,
                shape_size: int = 24) -> Path:
    """Write ``videos`` mp4 files and ``manifest.jsonl`` (path + caption) into ``folder``; return the
    manifest. Every shot shows the video's shape crossing the frame once, each shot on another
    background that contrasts with the shape (so every shot boundary is a hard cut). ``shape_size``
    is the shape's side or diameter in pixels. Deterministic: the same arguments give the same files."""
    if not 1 <= videos <= len(SUBJECTS):
        raise ValueError(f"videos must be between 1 and {len(SUBJECTS)}, got {videos}")
    from vfm_curator.synth import shape_frames, write_video
    from vfm_plugins.files import replace_file

    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (shape, colour, direction) in enumerate(subjects_for(videos)):
        choices = backgrounds_for(colour)
        order = np.random.default_rng(i).permutation(len(choices))
        frames: list[np.ndarray] = []
        for shot in range(shots):
            frames += shape_frames(frames_per_shot, shape=shape, colour=colour, direction=direction,
                                   background=choices[order[shot % len(choices)]], width=size, height=size,
                                   size=shape_size)
        name = f"video_{i:02d}.mp4"
        write_video(folder / name, frames, fps=24.0)
        rows.append({"path": name, "caption": f"a {colour} {shape} moving {direction}"})
    manifest = folder / "manifest.jsonl"
    replace_file(manifest, "".join(json.dumps(r) + "\n" for r in rows))  # a link at the name is replaced
    return manifest
