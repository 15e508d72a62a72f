"""Probing a video: what its container and first frame say about the video stream (:class:`Probe`:
display size, pixel aspect, rotation, frame rate, duration), and the frame-size limit checked
before any frame is decoded."""

from __future__ import annotations

from dataclasses import dataclass

from vfm_curator.errors import InputError, LimitError
from vfm_curator.io.container import _ffmpeg_reason, open_container, video_stream


@dataclass(frozen=True)
class Probe:
    """What the container says about a video's main video stream (:func:`video_stream`): display
    size, i.e. after the sample aspect ratio (square pixels) and the rotation."""

    fps: float
    frames: int  # container's count; 0 when unknown
    width: int
    height: int
    duration: float
    rotation: int  # degrees counter-clockwise to display the coded frames upright
    codec: str
    has_audio: bool
    sar: float = 1.0  # sample aspect ratio of the coded pixels (width/height is already scaled by it)
    stream: int = 0  # the file's index of the stream read (video_stream's pick)
    video_streams: int = 1  # video streams in the file, pictures included


def sample_aspect(stream) -> float:
    """The shape of a coded pixel (width / height), as FFmpeg guesses it: the container's value, else
    the bitstream's; 1 when unset, and when outside 1/4..4 (damaged or nonsense metadata)."""
    for sar in (stream.sample_aspect_ratio, stream.codec_context.sample_aspect_ratio):
        if sar is not None and sar.numerator > 0 and sar.denominator > 0 and 0.25 <= float(sar) <= 4:
            return float(sar)
    return 1.0


def display_width(coded_width: int, sar: float) -> int:
    """The width that shows ``coded_width`` pixels of shape ``sar`` as square pixels (the height is kept)."""
    return coded_width if abs(sar - 1.0) < 1e-3 else max(2, int(round(coded_width * sar)))


#: the decode stage's default ``max_pixels``: 1.9x the largest frame any H.264/HEVC level allows
#: (level 6.2: 35,651,584 luma samples; 8K UHD 7680x4320 is 33.2 M, DCI 8K 8192x4320 35.4 M), so
#: every standard stream passes, while a full-size RGB frame stays under 202 MB (a declared
#: 16384x16384 would be 805 MB of RGB, 3.2 GB as float32, before anything could fail)
MAX_PIXELS = 8192 * 8192


def probe(path: str, *, max_pixels: int | None = None) -> Probe:
    """The container's facts about ``path``'s video stream (:func:`video_stream`). With ``max_pixels``, a declared
    frame size above it is refused (:class:`LimitError`, kind ``too-large``) before any frame is
    decoded: a crafted or huge header must not make a worker allocate gigabytes a frame first."""
    with open_container(path) as container:
        stream = video_stream(container)
        coded_w, coded_h = stream.codec_context.width, stream.codec_context.height
        if max_pixels is not None and coded_w * coded_h > max_pixels:
            raise LimitError(f"frame size {coded_w}x{coded_h} ({coded_w * coded_h:,} pixels) is over the limit; "
                             f"accepted: at most max_pixels={max_pixels} pixels a frame (the decode stage's "
                             f"option; default {MAX_PIXELS:,}, 8192x8192)", kind="too-large")
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        fps = float(rate) if rate else 0.0
        duration = 0.0
        if stream.duration is not None and stream.time_base is not None:
            duration = float(stream.duration * stream.time_base)
        elif container.duration is not None:
            duration = container.duration / 1_000_000
        rotation = _stream_rotation(container, stream)
        sar = sample_aspect(stream)  # after a frame was decoded: the bitstream's value is known then
        width, height = display_width(stream.codec_context.width, sar), stream.codec_context.height
        if rotation % 180 == 90:
            width, height = height, width
        has_audio = bool(container.streams.audio)
        return Probe(fps, int(stream.frames or 0), width, height, duration, rotation, stream.codec_context.name,
                     has_audio, sar, stream.index, len(container.streams.video))


def _stream_rotation(container, stream) -> int:
    """Rotation of the first decodable frame (PyAV reads it from the display matrix). The container
    is closed after it, not rewound: a raw stream (.h264, .hevc, .m2v) cannot seek (EPERM)."""
    import av

    try:
        for frame in container.decode(stream):
            return int(round(frame.rotation)) % 360
    except (av.FFmpegError, ValueError) as exc:
        raise InputError(f"cannot decode any frame: {_ffmpeg_reason(exc)}") from exc
    return 0
