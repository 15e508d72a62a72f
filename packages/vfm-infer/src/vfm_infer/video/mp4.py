"""Write uint8 RGB frames to an MP4 file with H264 through PyAV."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np


def check_even_size(height: int, width: int) -> None:
    """H264 in yuv420p stores chroma at half resolution, so both sides must be even."""
    if height % 2 or width % 2:
        raise ValueError(f"H264 (yuv420p) needs an even height and width; got {height}x{width}")


def write_mp4(path: str | Path, frames: np.ndarray, fps: float = 24.0, *, crf: int = 18) -> Path:
    """Encode ``frames`` (T, H, W, 3) uint8 as H264 in an MP4 container; returns the path.

    Written beside ``path`` under a hidden name and renamed into place when complete, so an
    interrupted write (Ctrl-C, SIGTERM, a full disk) leaves no truncated video under ``path``, and an
    earlier file there stays whole until the new one replaces it."""
    import av

    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"expected uint8 frames (T, H, W, 3), got {frames.dtype} {frames.shape}")
    t, h, w, _ = frames.shape
    check_even_size(h, w)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with partial_file(path) as partial, av.open(str(partial), mode="w") as container:
        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.options = {"crf": str(crf)}
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():  # flush the encoder
            container.mux(packet)
    return path


def partial_path(path: Path) -> Path:
    """Where a file bound for ``path`` is written until it is complete: hidden, same folder (so the
    rename is atomic), same suffix (PyAV picks the container from it): ``.0000.partial.mp4``."""
    return path.with_name(f".{path.stem}.partial{path.suffix}")


@contextlib.contextmanager
def partial_file(path: Path) -> Iterator[Path]:
    """:func:`partial_path` of ``path`` for the block to write, renamed to ``path`` when the block ends
    (the block's files closed); removed if the block or the rename fails."""
    partial = partial_path(path)
    try:
        yield partial
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def read_mp4(path: str | Path) -> np.ndarray:
    """Decode every frame of a video file to (T, H, W, 3) uint8 (for checks and tests)."""
    import av

    with av.open(str(path)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    return np.stack(frames)
