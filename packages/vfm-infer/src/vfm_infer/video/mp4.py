"""Write uint8 RGB frames to an MP4 file with H264 through PyAV."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
from vfm_plugins.files import fresh_file
from vfm_plugins.x264 import x264_options


def check_even_size(height: int, width: int) -> None:
    """H264 in yuv420p stores chroma at half resolution, so both sides must be even."""
    if height % 2 or width % 2:
        raise ValueError(f"H264 (yuv420p) needs an even height and width; got {height}x{width}")


def write_mp4(path: str | Path, frames: np.ndarray, fps: float = 24.0, *, crf: int = 18) -> Path:
    """Encode ``frames`` (T, H, W, 3) uint8 (a numpy array or a torch tensor) as H264 in an MP4 container;
    returns the path.

    Written beside ``path`` under a hidden name and renamed into place when complete, so an
    interrupted write (Ctrl-C, SIGTERM, a full disk) leaves no truncated video under ``path``, and an
    earlier file there stays whole until the new one replaces it."""
    import av

    # checked before a tensor becomes an array: numpy has no bfloat16 (a bf16 decoder's output failed in the
    # conversion); numpy and torch name the other dtypes alike once "torch." is dropped
    dtype, shape = str(frames.dtype).removeprefix("torch."), tuple(frames.shape)
    if len(shape) != 4 or shape[-1] != 3 or dtype != "uint8":
        hint = " (a video (C, T, H, W) in [-1, 1]: to_uint8_frames(video))" if dtype != "uint8" or shape[-1:] != (3,) else ""
        raise ValueError(f"expected uint8 frames (T, H, W, 3), got {dtype} {shape}{hint}")
    if type(frames).__module__.startswith("torch"):  # a uint8 tensor was refused as "expected uint8, got torch.uint8"
        frames = frames.detach().cpu().numpy()
    t, h, w, _ = frames.shape
    check_even_size(h, w)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with partial_file(path) as partial, av.open(str(partial), mode="w") as container:
        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.options = x264_options({"crf": str(crf)})  # the same video, the same bytes (vfm_plugins.x264)
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():  # flush the encoder
            container.mux(packet)
    return path


#: A file bound for ``0003.mp4`` is written as ``.0003.partial.<random>.mp4`` (hidden, same folder so
#: the rename is atomic, same suffix: PyAV picks the container from it); ``.0003.partial.mp4`` is what
#: versions before the random part wrote, still recognised as a leftover.
_PARTIAL_NAME = re.compile(r"\.(?P<stem>.+)\.partial(?:\.[A-Za-z0-9_]+)?(?P<suffix>\.[^.]+)")


def partial_final_name(name: str) -> str | None:
    """The file name a partial file called ``name`` was bound for (``.0003.partial.k2x9q7ab.mp4`` ->
    ``0003.mp4``), or None when ``name`` is not a partial file's name: the one naming rule that
    :func:`partial_file` writes and a sweep of a killed run's leftovers reads."""
    match = _PARTIAL_NAME.fullmatch(name)
    return None if match is None else match["stem"] + match["suffix"]


@contextlib.contextmanager
def partial_file(path: Path) -> Iterator[Path]:
    """A new partial file for ``path`` (see ``_PARTIAL_NAME``; created exclusively with an
    unpredictable name, so a link planted at a guessable name is never written through) for the
    block to write, renamed to ``path`` when the block ends (the block's files closed); removed if
    the block or the rename fails."""
    with fresh_file(path, prefix=f".{path.stem}.partial.", suffix=path.suffix) as partial:
        yield partial


def read_mp4(path: str | Path, *, max_frames: int | None = None) -> np.ndarray:
    """Decode the frames of a video file to (T, H, W, 3) uint8: every one, or the first ``max_frames``
    (decoding stops there, so a long video costs its first frames only). A file without a video frame is a
    ValueError naming it; what PyAV cannot open or decode raises PyAV's error."""
    import av

    if max_frames is not None and max_frames < 1:
        raise ValueError(f"max_frames must be None (every frame) or >= 1; got {max_frames}")
    frames: list[np.ndarray] = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]  # IndexError: no video stream
        stream.thread_type = "AUTO"
        for frame in container.decode(stream):
            frames.append(frame.to_ndarray(format="rgb24"))
            if len(frames) == max_frames:
                break
    if not frames:
        raise ValueError(f"{path} has no video frame")
    return np.stack(frames)
