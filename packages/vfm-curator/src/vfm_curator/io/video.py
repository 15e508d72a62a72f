"""Reading videos with PyAV: probing, and decoding frames upright (rotation applied) with their times.

NVDEC is used through PyAV's hardware acceleration when asked for (``hwaccel="cuda"``) and an
NVIDIA device is present; otherwise decoding is on the CPU. Both give the same frames.
"""

from __future__ import annotations

import logging
import os
from contextlib import closing
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from vfm_curator.errors import InputError, LimitError

log = logging.getLogger("vfm_curator.video")


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


def open_container(path: str, hwaccel: str | None = None):
    """Open ``path`` with PyAV; an unusable file raises :class:`InputError` naming the problem."""
    import av

    if os.path.islink(path) and not os.path.exists(path):
        raise InputError(f"broken symbolic link: it points to {os.readlink(path)!r}, which does not exist")
    if not os.path.isfile(path):
        raise InputError(f"not a file: {path}")
    if os.path.getsize(path) == 0:
        raise InputError("empty file (0 bytes)")
    container = _open_hwaccel(path, hwaccel) if hwaccel else None
    if container is None:
        try:
            container = av.open(path)
        except av.FFmpegError as exc:
            raise InputError(f"cannot open as a video container: {_ffmpeg_reason(exc)}{_content_hint(path)}") from exc
    if not _playable(container):
        kinds = [s.type if s.type != "video" else "video (a still picture)" for s in container.streams] or ["none"]
        container.close()
        raise InputError(f"no video stream (streams: {', '.join(sorted(set(kinds)))})")
    return container


def _ffmpeg_reason(exc) -> str:
    """FFmpeg's reason without its errno number and the path (the failure record names the file)."""
    reason = getattr(exc, "strerror", None) or str(exc)
    return str(reason).rstrip(".")


def _content_hint(path: str) -> str:
    """What an unopenable file looks like from its first bytes, when that says more than FFmpeg:
    an image or a web page saved with a video extension, or an MP4/MOV whose index never got written."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return ""
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return f" (the file is {what}, not a video)"
    if head.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
        return " (the file is a web page (HTML), not a video: a failed download?)"
    if head[4:8] == b"ftyp" and not _has_top_box(path, b"moov"):
        return (" (an MP4/MOV file without its index (no 'moov' box): a download or recording that was "
                "cut off before it finished; it cannot be read without the index)")
    return ""


_MAGIC = ((b"\xff\xd8\xff", "a JPEG image"), (b"\x89PNG", "a PNG image"), (b"GIF8", "a GIF image"),
          (b"%PDF", "a PDF document"), (b"PK\x03\x04", "a ZIP archive"))


def _has_top_box(path: str, kind: bytes) -> bool:
    """Whether an ISO BMFF (MP4/MOV) file has a top-level box ``kind`` (walks the box headers only)."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        offset = 0
        while offset + 8 <= size:
            fh.seek(offset)
            header = fh.read(16)
            length, box = int.from_bytes(header[:4], "big"), header[4:8]
            if box == kind:
                return True
            if length == 1 and len(header) == 16:
                length = int.from_bytes(header[8:16], "big")
            if length < 8:  # 0: to the end of the file; anything else under 8 is damage
                return False
            offset += length
    return False


#: stream dispositions of a video stream that is a picture, not the video: cover art (mp4 ``covr``,
#: mkv attachments), thumbnails, still images
_PICTURE = ("attached_pic", "timed_thumbnails", "still_image")


def _is_picture(stream) -> bool:
    from av.stream import Disposition

    return any(stream.disposition & getattr(Disposition, name, 0) for name in _PICTURE)


def _playable(container) -> bool:
    return any(not _is_picture(s) for s in container.streams.video)


def video_stream(container):
    """The video stream to read: not cover art or a thumbnail (a file's first video stream often is,
    e.g. an mp4 or mkv with its poster picture), then the one with the most frames (the container's
    count), the longest (its duration), FFmpeg's pick (``av_find_best_stream``), the default one, the
    first. Every reader of a source uses this stream."""
    from av.stream import Disposition

    candidates = [s for s in container.streams.video if not _is_picture(s)] or list(container.streams.video)
    if len(candidates) == 1:
        return candidates[0]
    try:
        best = container.streams.best("video")
    except Exception:  # noqa: BLE001 - no pick is a tie, not an error
        best = None

    def rank(stream):
        return (int(stream.frames or 0), _stream_seconds(stream), best is not None and stream.index == best.index,
                bool(stream.disposition & Disposition.default), -stream.index)

    return max(candidates, key=rank)


def _stream_seconds(stream) -> float:
    """A stream's duration: its own, else Matroska's ``DURATION`` tag (``HH:MM:SS.nnnnnnnnn``), else 0."""
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    tag = (stream.metadata or {}).get("DURATION") or (stream.metadata or {}).get("duration") or ""
    try:
        h, m, sec = tag.split(":")
        return int(h) * 3600 + int(m) * 60 + float(sec)
    except ValueError:
        return 0.0


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


_HWACCEL_REFUSED: set[str] = set()


def _open_hwaccel(path: str, device_type: str):
    """``path`` opened with PyAV's ``device_type`` hwaccel, or None when the device cannot be created
    here (FFmpeg fails the open itself, e.g. EPERM for ``cuda`` without a GPU, although software
    fallback was asked for): the caller then opens it in software, and the device is named once
    per process, so the machine's missing GPU does not read as every video's fault."""
    import av
    from av.codec.hwaccel import HWAccel

    if device_type in _HWACCEL_REFUSED:
        return None
    try:
        return av.open(path, hwaccel=HWAccel(device_type=device_type, allow_software_fallback=True))
    except av.FFmpegError as exc:
        try:
            with av.open(path):
                pass
        except av.FFmpegError:
            raise InputError(f"cannot open as a video container: {exc}") from exc
        _HWACCEL_REFUSED.add(device_type)
        log.warning("hwaccel %r is not usable on this machine (%s); decoding in software", device_type, exc)
        return None


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
                     has_audio, sar)


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


def upright(frame_rgb: np.ndarray, rotation: int) -> np.ndarray:
    """Apply a counter-clockwise display rotation (0/90/180/270) to an (H, W, C) frame."""
    k = (int(round(rotation / 90.0))) % 4
    return np.ascontiguousarray(np.rot90(frame_rgb, k=k)) if k else frame_rgb


def iter_frames(
    path: str, *, width: int | None = None, height: int | None = None, hwaccel: str | None = None
) -> Iterator[tuple[float, np.ndarray]]:
    """Yield ``(time_s, frame)`` for every frame in presentation order; frame is (H, W, 3) uint8 RGB,
    upright. With ``width``/``height`` the frame is scaled by FFmpeg (given as *display* size).

    A decoding error after the first frame ends the stream there (a truncated file keeps the frames
    it has); an error before any frame raises :class:`InputError`. One frame is held at a time.
    """
    import av

    from av.video.reformatter import VideoReformatter

    count = 0
    reformatter = VideoReformatter()  # one per stream: FFmpeg's scaler is set up once, not per frame
    with closing(_decoded_sar(path, hwaccel)) as decoded:
        for t, frame, sar in decoded:
            try:
                rgb = _to_rgb(frame, width, height, reformatter, sar)
            except (av.FFmpegError, ValueError) as exc:  # a frame that cannot be converted: as a decoding error
                if count == 0:
                    raise InputError(f"cannot decode any frame: {_ffmpeg_reason(exc)}") from exc
                return
            count += 1
            yield t, rgb


def iter_decoded(path: str, *, hwaccel: str | None = None) -> Iterator[tuple[object, "_RGB"]]:
    """Like :func:`iter_frames` (same order, count and error rules) but yields ``(frame, rgb)``: the
    decoded ``av.VideoFrame`` as it came out of the decoder, and a callable giving the frame that
    :func:`iter_frames` would have yielded, converted only when called (transcode hands 4:2:0
    frames to the encoder as they are and converts only the few it samples)."""
    import av

    from av.video.reformatter import VideoReformatter

    reformatter = VideoReformatter()
    with closing(_decoded_sar(path, hwaccel)) as decoded:
        for i, (_, frame, sar) in enumerate(decoded):
            rgb = _RGB(frame, reformatter, sar)
            if i == 0:  # iter_frames fails a stream whose first frame cannot be converted
                try:
                    rgb()
                except (av.FFmpegError, ValueError) as exc:
                    raise InputError(f"cannot decode any frame: {_ffmpeg_reason(exc)}") from exc
            yield frame, rgb


class _RGB:
    """The upright RGB of one decoded frame, converted on first call. ``sar`` is the shape of its
    coded pixels: the RGB frame has square pixels (``size``, upright), so ``square`` says whether the
    decoded frame can stand for it as it is."""

    def __init__(self, frame, reformatter, sar: float = 1.0) -> None:
        self.frame, self.reformatter, self.value, self.sar = frame, reformatter, None, sar

    @property
    def square(self) -> bool:
        return display_width(self.frame.width, self.sar) == self.frame.width

    @property
    def size(self) -> tuple[int, int]:
        """``(width, height)`` of the frame this gives, without converting it."""
        w, h = display_width(self.frame.width, self.sar), self.frame.height
        return (h, w) if int(round(self.frame.rotation)) % 180 == 90 else (w, h)

    def __call__(self) -> np.ndarray:
        if self.value is None:
            self.value = _to_rgb(self.frame, None, None, self.reformatter, self.sar)
        return self.value


def frames_at(
    path: str, indices, *, width: int | None = None, height: int | None = None, hwaccel: str | None = None
) -> dict[int, np.ndarray]:
    """The frames of the given indices (same numbering and size as :func:`iter_frames`), from one
    decoding pass that stops after the last one and converts only the frames asked for; indices
    past the end are missing from the result."""
    wanted = set(int(i) for i in indices)
    out: dict[int, np.ndarray] = {}
    if not wanted:
        return out
    from av.video.reformatter import VideoReformatter

    last = max(wanted)
    reformatter = VideoReformatter()
    with closing(_decoded_sar(path, hwaccel)) as decoded:
        for i, (_, frame, sar) in enumerate(decoded):
            if i in wanted:
                out[i] = _to_rgb(frame, width, height, reformatter, sar)
            if i >= last:
                break
    return out


def threads_given() -> int:
    """The CPU threads this process was given (``OMP_NUM_THREADS``), or 0 when it was given none
    (FFmpeg's own choice: about one per core). In a Ray worker it is the CPUs its call was given
    (the runner defaults it to 1): the balancer already runs one worker per CPU, and a codec that
    also threads across cores it shares spends more CPU per frame (decoding: ~12 % warm, measured
    on 2 cores). The decoded pixels do not depend on it."""
    try:
        return max(0, int(os.environ.get("OMP_NUM_THREADS", "") or 0))
    except ValueError:
        return 0


def _decoded(path: str, hwaccel: str | None) -> Iterator[tuple[float, "object"]]:
    """``(time_s, av.VideoFrame)`` in presentation order, with the error rules of :func:`iter_frames`."""
    decoded = _decoded_sar(path, hwaccel)
    try:
        for t, frame, _ in decoded:
            yield t, frame
    finally:
        decoded.close()


def _decoded_sar(path: str, hwaccel: str | None) -> Iterator[tuple[float, "object", float]]:
    """``(time_s, av.VideoFrame, sample aspect ratio)`` of :func:`video_stream`'s frames in
    presentation order, with the error rules of :func:`iter_frames`."""
    import av

    container = open_container(path, hwaccel)
    try:
        stream = video_stream(container)
        stream.thread_type = "AUTO"
        threads = threads_given()
        if threads:
            stream.codec_context.thread_count = threads
        count = 0
        deinterlace = _Deinterlace(stream.time_base) if not hwaccel else None
        try:
            for frame in _frames_then_flush(container.decode(stream), deinterlace):
                t = float(frame.time) if frame.time is not None else count / max(float(stream.average_rate or 25), 1e-6)
                count += 1
                yield t, frame, sample_aspect(stream)
        except (av.FFmpegError, ValueError) as exc:
            if count == 0:
                raise InputError(f"cannot decode any frame: {_ffmpeg_reason(exc)}") from exc
    finally:
        container.close()


def _frames_then_flush(frames, deinterlace: "_Deinterlace | None"):
    """``frames`` as they come, through ``deinterlace`` when one is given (its last frame comes at the end)."""
    if deinterlace is None:
        yield from frames
        return
    for frame in frames:
        yield from deinterlace.push(frame)
    yield from deinterlace.push(None)


class _Deinterlace:
    """FFmpeg's ``bwdif`` over a stream from its first interlaced frame on (camcorder DV/HDV/AVCHD,
    broadcast .ts, DVD .vob): one progressive frame for each frame in, same times and tags, so a
    clip shows no combing and the frame count is the decoder's. Progressive frames before the first
    interlaced one pass as they are; after it, ``deint=interlaced`` leaves progressive frames alone.
    A frame of another size or format starts a new filter (the old one is flushed first)."""

    def __init__(self, time_base) -> None:
        self.time_base, self.graph, self.shape = time_base, None, None

    def push(self, frame):
        """The frames ready after ``frame`` (None: the end, every frame held)."""
        import av

        if frame is not None and self.graph is None and not frame.interlaced_frame:
            yield frame
            return
        shape = None if frame is None else (frame.width, frame.height, frame.format.name)
        if self.graph is not None and shape != self.shape:  # the end, or a new size: flush this filter
            self.graph.push(None)
            yield from self._pull(av)
            self.graph = None
        if frame is None:
            return
        if self.graph is None:
            self.graph, self.shape = self._build(frame), shape
        self.graph.push(frame)
        yield from self._pull(av)

    def _build(self, frame):
        import av

        graph = av.filter.Graph()
        source = graph.add_buffer(width=frame.width, height=frame.height, format=frame.format,
                                  time_base=frame.time_base or self.time_base)
        bwdif = graph.add("bwdif", "mode=send_frame:parity=auto:deint=interlaced")
        sink = graph.add("buffersink")
        source.link_to(bwdif)
        bwdif.link_to(sink)
        graph.configure()
        return graph

    def _pull(self, av):
        while True:
            try:
                yield self.graph.pull()
            except (av.BlockingIOError, av.EOFError):
                return


def _to_rgb(frame, width: int | None, height: int | None, reformatter, sar: float = 1.0) -> np.ndarray:
    """An av.VideoFrame as upright (H, W, 3) uint8 RGB, scaled to the display size ``width x height``;
    without a size, at its own size, made of square pixels when ``sar`` (the shape of its coded
    pixels) is not 1: 1440x1080 HDV (4:3 pixels) gives 1920x1080, 720x480 DV (8:9) 640x480.

    ``reformatter`` (an ``av.video.reformatter.VideoReformatter``) is reused across a stream's frames:
    ``frame.reformat`` and ``frame.to_ndarray(format=...)`` build a new FFmpeg scaler for every frame,
    which cost 7x the conversion itself at 64x36 (1.7 ms a frame, more than decoding) and 2-7x at
    full size; the pixels are the same.

    The matrix and range are the frame's tags (BT.601 when untagged). swscale's flags are chosen
    for colour fidelity (:data:`FULL_SIZE_FLAGS`, :func:`scaled_flags`): its default 4:2:0 -> RGB
    paths truncate, which darkened every frame by 1-2.3 levels of 255 (docs/decoders.md)."""
    rotation = int(round(frame.rotation)) % 360
    w, h = width, height
    if not (w and h) and display_width(frame.width, sar) != frame.width:
        w, h = display_width(frame.width, sar), frame.height  # coded orientation already
    elif w and h and rotation % 180 == 90:
        w, h = h, w  # scale in coded orientation, then rotate
    if w and h and (w, h) != (frame.width, frame.height):
        rgb = reformatter.reformat(frame, width=w, height=h, format="rgb24",
                                   interpolation=scaled_flags(frame.width, frame.height, w, h)).to_ndarray()
    else:
        if frame.sw_format is not None:  # a hardware frame (hwaccel="cuda"): copied to the host (NV12)
            frame = reformatter.reformat(frame, format=frame.sw_format.name)
        if frame.format.name in _YUV420:
            rgb = reformatter.reformat(_yuv420_as_444(frame), format="rgb24").to_ndarray()
        else:
            rgb = reformatter.reformat(frame, format="rgb24", interpolation=FULL_SIZE_FLAGS).to_ndarray()
    return upright(rgb, rotation)


_YUV420 = ("yuv420p", "yuvj420p", "nv12")


def _plane(plane, width: int) -> np.ndarray:
    """A frame's plane as an (height, width) uint8 view (its rows may be padded)."""
    return np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)[:, :width]


def _yuv420_as_444(frame):
    """An 8-bit 4:2:0 frame (planar, or NV12 as the CUDA hwaccel hands it over) as a yuv444p frame
    with each chroma sample repeated over its 2x2 pixels (as swscale's default unscaled path and the
    GPU decoders pair them), same colour tags. swscale
    converts 4:4:4 to RGB exactly (correctly rounded), 4:2:0 only with flags that also move chroma
    one pixel left (:data:`FULL_SIZE_FLAGS`): a clip transcoded again and again would drift."""
    import av

    h, w = frame.height, frame.width
    planes = frame.planes
    if frame.format.name == "nv12":  # one plane of interleaved U, V
        uv = _plane(planes[1], 2 * planes[1].width)
        sources = [_plane(planes[0], w), uv[:, 0::2], uv[:, 1::2]]
    else:
        sources = [_plane(p, p.width) for p in planes[:3]]
    out = av.VideoFrame(w, h, "yuv444p")
    for i, (src, dst_plane) in enumerate(zip(sources, out.planes)):
        dst = _plane(dst_plane, w)
        if i == 0:
            dst[:] = src
        else:
            dst[0::2, 0::2] = src[: (h + 1) // 2, : (w + 1) // 2]
            dst[1::2, 0::2] = src[: h // 2, : (w + 1) // 2]
            dst[0::2, 1::2] = src[: (h + 1) // 2, : w // 2]
            dst[1::2, 1::2] = src[: h // 2, : w // 2]
    out.colorspace, out.color_range = frame.colorspace, frame.color_range
    return out


# swscale flags (libswscale/swscale.h) for YUV -> rgb24. Without ACCURATE_RND and FULL_CHR_H_INT,
# swscale converts 4:2:0 with its table-driven fast paths, which truncate: measured against an exact
# float conversion of the decoded planes, -1.0/-1.45/-1.0 (R/G/B) at full size and -1.8/-1.2/-1.6
# scaled for limited-range BT.601, -2.3/-1.8/-2.2 scaled for BT.709, -0.5/-1.0/-0.5 full range
# (4:4:4 was already exact). With these flags every tagged case is within 0.15 on average.
_SWS_BILINEAR, _SWS_POINT, _SWS_FULL_CHR_H_INT, _SWS_ACCURATE_RND = 0x2, 0x10, 0x2000, 0x40000
#: full size, formats other than 8-bit 4:2:0 (those go through :func:`_yuv420_as_444`): the exact
#: conversion, correctly rounded; 4:2:0 chroma would be sampled at ``(x + 1) // 2`` across
FULL_SIZE_FLAGS = _SWS_POINT | _SWS_FULL_CHR_H_INT | _SWS_ACCURATE_RND
#: scaled: bilinear (antialiased when shrinking) with chroma scaled to the full output width, rounded
SCALED_FLAGS = _SWS_BILINEAR | _SWS_FULL_CHR_H_INT
_SWS_AREA = 0x20
#: shrunk to a detection size (:func:`scaled_flags`): an area average (a box filter over the source
#: pixels of each output pixel) instead of bilinear's tent, twice as wide, whose taps grow with the
#: factor: 28-36 % cheaper (64x36 from 320x180 0.128 -> 0.092 ms a frame, from 854x480 0.26 -> 0.17,
#: from 1920x1080 0.68 -> 0.44), pixels within 4 levels of bilinear's, the same cuts on
#: benchmarks/shot_detection.py and within tests/curator/test_colour_fidelity.py's bounds
SMALL_FLAGS = _SWS_AREA | _SWS_FULL_CHR_H_INT
#: frames at most this many pixels on each side, shrunk at least 2x both ways, get :data:`SMALL_FLAGS`
SMALL_MAX_SIDE = 128


def scaled_flags(src_w: int, src_h: int, w: int, h: int) -> int:
    """The swscale flags for scaling ``src_w x src_h`` to ``w x h`` (coded orientation).
    :data:`SMALL_FLAGS` for the detection sizes: at most :data:`SMALL_MAX_SIDE` a side and at most
    half the source both ways (every box averages 2x2 source pixels or more): the decode stage's
    64-wide frames, a detector's own (TransNetV2's 48x27), stitch's boundary frames (the decode
    stage's size, so the same pixels). :data:`SCALED_FLAGS` for every other size (shard frames above it,
    sample frames at a model's size, any enlargement), as before."""
    return SMALL_FLAGS if is_detection_shrink(src_w, src_h, w, h) else SCALED_FLAGS


def is_detection_shrink(src_w: int, src_h: int, w: int, h: int) -> bool:
    """Whether ``src_w x src_h -> w x h`` is a shrink to a detection size: at most
    :data:`SMALL_MAX_SIDE` a side and at most half the source both ways. The one rule for every
    scaler: swscale's flags here (:func:`scaled_flags`), the torch area average of the GPU decoders
    and of the torch scorer (:func:`vfm_curator.decoders.yuv.resize_planes`). Symmetric in
    width/height, so coded and display orientation give the same answer."""
    return max(w, h) <= SMALL_MAX_SIDE and 2 * w <= src_w and 2 * h <= src_h


def small_size(width: int, height: int, target_width: int) -> tuple[int, int]:
    """A downscaled display size with the same aspect ratio, both sides even and >= 2."""
    w = max(2, min(target_width, width) // 2 * 2)
    h = max(2, int(round(height * w / max(width, 1))) // 2 * 2)
    return w, h


def release_freed_memory() -> None:
    """Collect cycles (PyAV containers hold some) and hand freed heap back to the system (glibc's
    ``malloc_trim``; a no-op elsewhere). Called after each encoder closes: without it, the freed
    buffers of one 720p libx264 encoder after another fragment the heap and the resident size
    grows with the number of clips (255 MB vs 206 MB transcoding a 10-minute 720p video).

    Only the young generations are collected (where a just-closed container's objects are; PyAV
    18 leaves none in cycles): a full collection took ~26 ms a call, 15 % of transcoding small clips."""
    import ctypes
    import gc

    gc.collect(1)
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
