"""What every decoder backend gives: frames in display order, upright, RGB uint8, at a requested
display size and/or full size, each with its presentation time in seconds.

Backends differ only in where the frames live: PyAV hands out numpy arrays on the CPU
(``device == "cpu"``); GPU backends hand out torch tensors on their CUDA device, never copied to the
host. The container facts (rotation, presentation times, colour range and matrix) are read with
PyAV for every backend, so all of them agree with the CPU path on what a frame is and when it shows.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, ClassVar, Iterator, Optional, Sequence, Tuple

from vfm_curator.errors import InputError

#: ``None`` asks for the frame at its full (display) size; ``(width, height)`` for a scaled one.
Size = Optional[Tuple[int, int]]


def gpu_library(module: str, label: str, *, torch_use: str, no_cuda: str = "no CUDA device is visible") -> tuple[Any, str]:
    """``(module, "")`` when a GPU backend's library loads and torch sees a CUDA device, else
    ``(None, why not)`` in words a user acts on (a wheel that cannot load its libraries included)."""
    try:
        lib = importlib.import_module(module)
    except ImportError:
        return None, f"{label} is not installed"
    except Exception as exc:  # noqa: BLE001 - a wheel that cannot load its libraries
        # e.g. PyNvVideoCodec's import needs the driver's libnvidia-encode and raises a RuntimeError
        # with a 20-line troubleshooting text: its first line says what is missing
        return None, f"{label} does not load: {one_line(exc, first=True)}"
    try:
        import torch
    except ImportError:
        return None, f"torch is not installed ({torch_use})"
    if not torch.cuda.is_available():
        return None, no_cuda
    return lib, ""


def one_line(exc: BaseException, *, first: bool = False) -> str:
    """``"Type: message"`` on one line. PyNvVideoCodec's errors span several lines (a call, an error
    code, FFmpeg's words, a source line): they are joined with spaces, or cut to the first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = (lines[0] if first else " ".join(lines)) if lines else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: FFmpeg's AV_NOPTS_VALUE: "no timestamp", as PyNvVideoCodec passes it on
NO_PTS = -(2**63)


class FrameTimes:
    """Gives each frame a GPU decoder hands out (in display order) the container's presentation time
    for it (:func:`stream_facts` ``.times``), so that a backend's frames are PyAV's frames.

    Frames take the times in order: frame ``i`` gets ``times[i]``. With ``time_base`` (seconds per
    tick) and the frames' own timestamps, one more rule: frames stamped before the first container
    time, while none has been matched yet, are skipped (``None``): the pre-roll an edit list makes
    the decoder output and PyAV drops (a clip cut without re-encoding). The first timestamp that is
    not the time it is given (another unit, no timestamps) turns timestamps off for the rest.
    :attr:`done` is true once every time is handed out (``time_of`` then gives ``None``)."""

    def __init__(self, times: Sequence[float], time_base: Optional[float] = None) -> None:
        self.times = tuple(times)
        self.time_base = time_base if time_base and time_base > 0 else None
        gaps = [b - a for a, b in zip(self.times, self.times[1:]) if b > a]
        self._eps = max(min(gaps) / 2 if gaps else 1e-6, (self.time_base or 0.0) / 2)
        self.next = 0  # index of the next container time to hand out
        self.use_pts = self.time_base is not None
        self.skipped = 0  # pre-roll frames left out

    @property
    def done(self) -> bool:
        return self.next >= len(self.times)

    def time_of(self, pts: Optional[int] = None) -> Optional[float]:
        """The time of the next decoded frame (``pts``: its timestamp in ticks, if it has one), or
        ``None``: leave this frame out (pre-roll, or every time is handed out)."""
        if self.done:
            return None
        t = self.times[self.next]
        if self.use_pts:
            if pts is None or pts == NO_PTS:
                self.use_pts = False
            else:
                x = float(pts) * self.time_base
                if self.next == 0 and x < t - self._eps:
                    self.skipped += 1
                    return None
                if abs(x - t) > self._eps:
                    self.use_pts = False
        self.next += 1
        return t


class Decoder:
    """A decoder backend. Subclasses set :attr:`name`, implement :meth:`available` and :meth:`decode`.

    ``decode(path, sizes)`` yields ``(time_s, frames)`` with one frame per requested size (``None``:
    full size; ``(w, h)``: that display size), each an (H, W, 3) uint8 RGB array (numpy on the CPU,
    torch on :attr:`device` for GPU backends), upright. A decoding error after the first frame ends
    the stream there (a truncated file keeps the frames it has); one before any frame raises
    :class:`~vfm_curator.errors.InputError`.
    """

    name: ClassVar[str] = "decoder"
    #: whether frames come as torch tensors on a CUDA device (the stage then scores them there)
    uses_gpu: ClassVar[bool] = False

    def __init__(self, device: str | None = None) -> None:
        self.device = device or "cpu"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """``(True, what)`` when this backend's library and device are present here, else
        ``(False, why not)``. Cheap after the first call (backends cache their probes)."""
        raise NotImplementedError

    def decode(self, path: str, sizes: Sequence[Size] = (None,)) -> Iterator[tuple[float, list[Any]]]:
        raise NotImplementedError

    def frames(self, path: str, size: Size = None) -> Iterator[tuple[float, Any]]:
        """``(time_s, frame)`` at one size (``None``: full size, ``(w, h)``: display size)."""
        for t, (frame,) in self.decode(path, (size,)):
            yield t, frame

    def __repr__(self) -> str:
        return f"{type(self).__name__}(device={self.device!r})"


def check_sizes(sizes: Sequence[Any]) -> list[Size]:
    """The requested sizes as ``None`` or ``(w, h)`` positive ints; anything else is a ValueError."""
    out: list[Size] = []
    if not sizes:
        raise ValueError("decode needs at least one size (None for full size, or (width, height))")
    for s in sizes:
        if s is None:
            out.append(None)
            continue
        try:
            w, h = (int(v) for v in s)
        except (TypeError, ValueError):
            raise ValueError(f"a frame size must be None or (width, height), got {s!r}") from None
        if w < 1 or h < 1:
            raise ValueError(f"a frame size must be positive, got {s!r}")
        out.append((w, h))
    return out


@dataclass(frozen=True)
class StreamFacts:
    """What the container says about the video stream (:func:`~vfm_curator.io.video.video_stream`), for backends that decode without PyAV."""

    coded_width: int
    coded_height: int
    rotation: int  # degrees counter-clockwise to display upright (PyAV's frame.rotation)
    full_range: bool  # JPEG/full range (0-255) instead of limited (16-235)
    matrix: str  # "bt601", "bt709" or "bt2020": the YUV -> RGB coefficients FFmpeg would use
    times: tuple[float, ...]  # presentation times in display order, one per frame PyAV would decode
    pix_fmt: str


# AVColorSpace values (libavutil/pixfmt.h) -> the coefficients swscale uses for them; anything else
# (unspecified, BT470BG, SMPTE170M, ...) is BT.601, swscale's default.
_MATRIX = {1: "bt709", 9: "bt2020", 10: "bt2020"}


def stream_facts(path: str) -> StreamFacts:
    """Rotation, colour range and matrix (from the first decoded frame, as PyAV converts it) and the
    presentation time of every frame (from the packets' timestamps, demuxed without decoding: the
    times PyAV's decoder gives its frames, in display order)."""
    import av

    from vfm_curator.io.video import open_container, video_stream

    with open_container(path) as container:
        stream = video_stream(container)  # the one every reader uses: not a cover picture
        first = None
        try:
            for frame in container.decode(stream):
                first = frame
                break
        except (av.FFmpegError, ValueError) as exc:
            raise InputError(f"cannot decode any frame: {exc}") from exc
        if first is None:
            raise InputError("cannot decode any frame: the video stream has none")
        rotation = int(round(first.rotation)) % 360
        pix_fmt = first.format.name
        full = int(first.color_range) == 2 or pix_fmt.startswith("yuvj")
        matrix = _MATRIX.get(int(first.colorspace), "bt601")
        width, height = first.width, first.height
    return StreamFacts(width, height, rotation, full, matrix, container_times(path), pix_fmt)


def container_times(path: str) -> tuple[float, ...]:
    """Presentation times (seconds, ascending) of the video stream's frames from its packets, without
    decoding: the times :func:`vfm_curator.io.video.iter_frames` gives. Packets the container marks
    to discard (edit lists) are left out, as the decoder leaves their frames out; without timestamps
    (raw streams) the times are ``i / fps``, as PyAV's path does."""
    from vfm_curator.io.video import open_container, video_stream

    with open_container(path) as container:
        stream = video_stream(container)  # the one every reader uses: not a cover picture
        base = stream.time_base
        pts, missing = [], 0
        for packet in container.demux(stream):
            if packet.size == 0 or packet.is_discard:
                continue
            if packet.pts is None:
                missing += 1
            else:
                pts.append(packet.pts)
        if missing or base is None:
            fps = max(float(stream.average_rate or 25), 1e-6)
            return tuple(i / fps for i in range(len(pts) + missing))
    return tuple(float(p * base) for p in sorted(pts))
