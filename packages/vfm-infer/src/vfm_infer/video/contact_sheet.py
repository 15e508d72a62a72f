"""A PNG grid of evenly spaced frames, for a quick look at a generated video."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from vfm_infer.video.mp4 import partial_file


def contact_sheet(frames: np.ndarray, *, max_frames: int = 16, columns: int | None = None, gap: int = 2) -> np.ndarray:
    """Tile up to ``max_frames`` evenly spaced frames of (T, H, W, 3) uint8 into one (H', W', 3) image."""
    t, h, w, _ = frames.shape
    picks = np.unique(np.linspace(0, t - 1, num=min(t, max_frames)).round().astype(int))
    columns = columns or math.ceil(math.sqrt(len(picks)))
    rows = math.ceil(len(picks) / columns)
    sheet = np.full((rows * h + (rows - 1) * gap, columns * w + (columns - 1) * gap, 3), 255, dtype=np.uint8)
    for n, i in enumerate(picks):
        r, c = divmod(n, columns)
        sheet[r * (h + gap) : r * (h + gap) + h, c * (w + gap) : c * (w + gap) + w] = frames[i]
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
