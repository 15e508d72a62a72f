"""The demo's input: short videos of moving shapes, several shots each, and a captioned manifest."""

from __future__ import annotations

import json
from itertools import product
from pathlib import Path

# (shape, colour, direction) per video: distinct enough that the captions mean something.
SUBJECTS = list(product(("circle", "square"), ("red", "green", "blue", "yellow"), ("right", "left", "down", "up")))


def make_inputs(folder: Path, videos: int, *, shots: int = 3, frames_per_shot: int = 24, size: int = 64) -> Path:
    """Write ``videos`` mp4 files and ``manifest.jsonl`` (path + caption) into ``folder``; return the
    manifest. Deterministic: the same arguments give the same files."""
    if not 1 <= videos <= len(SUBJECTS):
        raise ValueError(f"videos must be between 1 and {len(SUBJECTS)}, got {videos}")
    from vfm_curator.synth import make_shapes_video

    folder.mkdir(parents=True, exist_ok=True)
    step = len(SUBJECTS) // videos  # spread the subjects over shapes, colours and directions
    rows = []
    for i in range(videos):
        shape, colour, direction = SUBJECTS[(i * step + i) % len(SUBJECTS)]
        name = f"video_{i:02d}.mp4"
        caption = make_shapes_video(
            folder / name, shape=shape, colour=colour, direction=direction,
            shots=shots, frames_per_shot=frames_per_shot, width=size, height=size, seed=i,
        )
        rows.append({"path": name, "caption": caption})
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return manifest
