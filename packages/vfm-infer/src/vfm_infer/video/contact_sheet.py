"""A PNG grid of evenly spaced frames, for a quick look at a generated video."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from vfm_plugins.spacing import evenly_spaced

from vfm_infer.video.mp4 import partial_file


def contact_sheet(frames: np.ndarray, *, max_frames: int = 16, columns: int | None = None, gap: int = 2,
                  min_height: int = 0) -> np.ndarray:
    """Tile up to ``max_frames`` evenly spaced frames of (T, H, W, 3) uint8 into one (H', W', 3) image, each
    enlarged (nearest neighbour, a whole factor) to at least ``min_height`` pixels high: a tiny model's
    frames of 8 x 8 can be seen."""
    picks = evenly_spaced(len(frames), max_frames)
    scale = max(1, -(-min_height // frames.shape[1]))
    shown = frames[picks].repeat(scale, axis=1).repeat(scale, axis=2)  # enlarged after picking: fewer pixels
    _, h, w, _ = shown.shape
    columns = columns or math.ceil(math.sqrt(len(picks)))
    rows = math.ceil(len(picks) / columns)
    sheet = np.full((rows * h + (rows - 1) * gap, columns * w + (columns - 1) * gap, 3), 255, dtype=np.uint8)
    for n, frame in enumerate(shown):
        r, c = divmod(n, columns)
        sheet[r * (h + gap) : r * (h + gap) + h, c * (w + gap) : c * (w + gap) + w] = frame
    return sheet


def row_per_video(videos: list[np.ndarray], *, max_frames: int = 8, min_height: int = 64, gap: int = 2) -> np.ndarray:
    """One image with a row per video (in order) of up to ``max_frames`` evenly spaced frames of each
    (T, H, W, 3) uint8 video, enlarged to at least ``min_height`` pixels high (see :func:`contact_sheet`);
    white between the frames and the rows, and right of a shorter row."""
    rows = [contact_sheet(v, max_frames=max_frames, columns=min(len(v), max_frames), gap=gap, min_height=min_height)
            for v in videos]
    sheet = np.full((sum(r.shape[0] for r in rows) + gap * (len(rows) - 1), max(r.shape[1] for r in rows), 3), 255,
                    dtype=np.uint8)
    top = 0
    for row in rows:
        sheet[top : top + row.shape[0], : row.shape[1]] = row
        top += row.shape[0] + gap
    return sheet


def write_png(path: str | Path, image: np.ndarray) -> Path:
    """Encode an (H, W, 3) uint8 image as PNG with PyAV's png encoder."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    codec = av.CodecContext.create("png", "w")
    codec.width, codec.height, codec.pix_fmt = image.shape[1], image.shape[0], "rgb24"
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
    data = b"".join(bytes(p) for p in [*codec.encode(frame), *codec.encode(None)])
    with partial_file(path) as partial:  # renamed into place when whole, as write_mp4 does
        partial.write_bytes(data)
    return path


def read_png(path: str | Path) -> np.ndarray:
    """Decode a PNG to (H, W, 3) uint8."""
    import av

    with av.open(str(path)) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")
