"""Messy real-world video files made with PyAV, for the ``test_messy_*`` tests: other codecs and
containers (HEVC, VP9/webm, AV1, ProRes .mov, MPEG-2 .ts/.mpg, MPEG-4, MJPEG), 10-bit and 4:2:2 /
4:4:4 sources, odd and tiny sizes, non-square pixels, rotation, irregular timestamps, two video
streams, a size change mid-stream. Every file is tiny (a few frames) so the tests stay fast."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np


def pattern(i: int, width: int, height: int, seed: int = 0) -> np.ndarray:
    """Frame ``i`` of a smoothly drifting colour pattern (H, W, 3) uint8 (a shot with motion)."""
    rng = np.random.default_rng(seed)
    colours = rng.uniform(30, 225, size=(2, 3)).astype(np.float32)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    a = 0.5 + 0.5 * np.sin(2 * np.pi * (x + 2 * i) / max(width, 8) + 2 * np.pi * y / max(height, 8))
    img = colours[0] * a[..., None] + colours[1] * (1 - a[..., None])
    return np.clip(img, 0, 255).astype(np.uint8)


def write(
    path: str | Path,
    num_frames: int = 30,
    *,
    width: int = 64,
    height: int = 48,
    fps: float = 24.0,
    codec: str = "libx264",
    pix_fmt: str = "yuv420p",
    fmt: str | None = None,
    options: dict | None = None,
    rotation: int = 0,
    sar: Fraction | None = None,
    pts: list[int] | None = None,
    time_base: Fraction | None = None,
    sizes: list[tuple[int, int]] | None = None,
    frames: list[np.ndarray] | None = None,
    extra_video: bool = False,
    seed: int = 0,
    first: int = 0,
) -> Path:
    """Encode ``num_frames`` pattern frames with ``codec``/``pix_fmt`` into ``path`` (container from
    the extension, or ``fmt``). ``pts`` (in ``time_base``) gives irregular timestamps; ``sizes``
    gives each frame's size (a resolution change mid-stream: the encoder is given the first);
    ``extra_video`` adds a second video stream; ``sar`` a sample aspect ratio; ``first`` is the
    pattern's first frame (a part that goes on from another)."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rate = Fraction(fps).limit_denominator(1001)
    container = av.open(str(path), "w", format=fmt)
    streams = []
    for k in range(2 if extra_video else 1):
        stream = container.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        if options:
            stream.options = dict(options)
        elif codec == "libx264":
            stream.options = {"preset": "ultrafast", "crf": "18"}
        tb = time_base or (1 / rate)
        stream.codec_context.time_base = tb
        if sar is not None:
            stream.codec_context.sample_aspect_ratio = sar
        if rotation and k == 0:
            stream.set_display_rotation(rotation)
        streams.append(stream)
    tb = time_base or (1 / rate)
    for i in range(num_frames):
        w, h = sizes[i] if sizes else (width, height)
        img = frames[i] if frames is not None else pattern(first + i, w, h, seed)
        for stream in streams:
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            if frame.format.name != pix_fmt or (w, h) != (stream.width, stream.height):
                frame = frame.reformat(width=stream.width if sizes is None else w,
                                       height=stream.height if sizes is None else h, format=pix_fmt)
            frame.pts = pts[i] if pts is not None else i
            frame.time_base = tb
            for packet in stream.encode(frame):
                container.mux(packet)
    for stream in streams:
        for packet in stream.encode():
            container.mux(packet)
    container.close()
    return path


def decoded_frames(path: str | Path) -> list:
    """Every decoded frame of a file's first video stream (``av.VideoFrame``)."""
    import av

    with av.open(str(path)) as container:
        return list(container.decode(video=0))


def spliced(path: str | Path, parts: list[dict], *, fmt: str = "mpegts") -> Path:
    """Files of ``parts`` (each :func:`write`'s keyword arguments) written as ``fmt`` and joined byte
    by byte, as ``cat a.ts b.ts > c.ts`` does: each part's clock starts again, sizes may differ."""
    path = Path(path)
    data = b""
    for k, part in enumerate(parts):
        piece = write(path.with_name(f".part{k}.{path.name}"), fmt=fmt, **part)
        data += piece.read_bytes()
        piece.unlink()
    path.write_bytes(data)
    return path


def _encode(container, stream, frames) -> None:
    """Encode ``frames`` (with their pts) into ``stream`` and flush it."""
    for frame in frames:
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)


def _cover_picture(stream) -> None:
    """A 32x32 grey mjpeg picture as the whole of ``stream`` (a poster, cover art)."""
    import av

    stream.width, stream.height, stream.pix_fmt = 32, 32, "yuvj420p"
    picture = av.VideoFrame.from_ndarray(np.full((32, 32, 3), 200, np.uint8), format="rgb24").reformat(format="yuvj420p")
    picture.pts = 0
    _encode(stream.container, stream, [picture])


def _rgb_frame(img: np.ndarray, pts: int, fmt: str | None = None):
    import av

    frame = av.VideoFrame.from_ndarray(img, format="rgb24")
    if fmt is not None:
        frame = frame.reformat(format=fmt)
    frame.pts = pts
    return frame


def _tone(audio, seconds_samples: np.ndarray, rate: int, offset: int = 0, size: int = 1024):
    """``seconds_samples`` (mono float) as audio frames of ``size`` samples from ``offset``, zero-padded."""
    import av

    for start in range(0, len(seconds_samples), size):
        chunk = np.pad(seconds_samples[start:start + size], (0, max(0, start + size - len(seconds_samples))))
        frame = av.AudioFrame.from_ndarray(chunk[None, :], format="fltp", layout="mono")
        frame.sample_rate, frame.pts, frame.time_base = rate, offset + start, Fraction(1, rate)
        yield frame


def with_cover_first(path: str | Path, num_frames: int = 30, *, width: int = 64, height: int = 48) -> Path:
    """A video whose first video stream is a one-frame picture (a poster or cover) and whose second
    is the real video, as tagging tools leave them."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    container = av.open(str(path), "w")
    cover = container.add_stream("mjpeg", rate=1)
    cover.width, cover.height = 32, 32
    video = container.add_stream("libx264", rate=24)
    video.width, video.height, video.pix_fmt = width, height, "yuv420p"
    video.options = {"preset": "ultrafast"}
    _cover_picture(cover)
    _encode(container, video, (_rgb_frame(pattern(i, width, height), i) for i in range(num_frames)))
    container.close()
    return path


def with_audio(path: str | Path, num_frames: int = 50, *, fps: int = 25, start_s: float = 0.0,
               fmt: str | None = None, acodec: str = "aac", rate: int = 16000) -> Path:
    """H264 video and a tone (``acodec`` at ``rate`` Hz, mono), both starting at ``start_s`` on the
    file's clock (a broadcast .ts starts anywhere), 64x48."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    container = av.open(str(path), "w", format=fmt)
    video = container.add_stream("libx264", rate=fps)
    video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
    video.options = {"preset": "ultrafast"}
    audio = container.add_stream(acodec, rate=rate, layout="mono")
    first = round(start_s * fps)

    def frames():
        for i in range(num_frames):
            frame = _rgb_frame(pattern(i, 64, 48), first + i)
            frame.time_base = Fraction(1, fps)
            yield frame

    _encode(container, video, frames())
    samples = (0.5 * np.sin(2 * np.pi * 440 * np.arange(rate * num_frames // fps) / rate)).astype(np.float32)
    _encode(container, audio, _tone(audio, samples, rate, offset=round(start_s * rate),
                                    size=audio.codec_context.frame_size or 1024))
    container.close()
    return path


def hdr10(path: str | Path, num_frames: int = 30, *, width: int = 64, height: int = 48) -> Path:
    """10-bit HEVC tagged as HDR10: BT.2020 primaries and matrix, PQ (SMPTE 2084) transfer."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    container = av.open(str(path), "w")
    stream = container.add_stream("libx265", rate=24)
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p10le"
    stream.options = {"preset": "ultrafast",
                      "x265-params": "log-level=none:colorprim=bt2020:transfer=smpte2084:colormatrix=bt2020nc"}
    context = stream.codec_context
    context.color_primaries, context.color_trc, context.colorspace = 9, 16, 9  # BT2020, SMPTE2084, BT2020_NCL
    _encode(container, stream, (_rgb_frame(pattern(i, width, height), i, "yuv420p10le") for i in range(num_frames)))
    container.close()
    return path


def song_with_cover(path: str | Path, seconds: float = 1.0) -> Path:
    """An AAC track with its cover picture (an ``attached_pic`` video stream): music, not video."""
    import av
    from av.stream import Disposition

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    container = av.open(str(path), "w")
    audio = container.add_stream("aac", rate=16000)
    cover = container.add_stream("mjpeg", rate=1)
    cover.width, cover.height = 32, 32
    cover.disposition = Disposition.attached_pic
    _cover_picture(cover)
    samples = np.sin(2 * np.pi * 440 * np.arange(int(16000 * seconds)) / 16000).astype(np.float32)
    _encode(container, audio, _tone(audio, samples, 16000))
    container.close()
    return path


def interlaced(path: str | Path, num_frames: int = 30, *, width: int = 64, height: int = 48, fmt: str | None = None) -> Path:
    """Interlaced H264 (top field first) of field-rendered motion, as a camcorder or broadcast shoots it:
    a bright bar moving right, the even rows at time ``i`` and the odd rows half a frame later, so
    a frame shown as it is has combed edges."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    container = av.open(str(path), "w", format=fmt)
    stream = container.add_stream("libx264", rate=25)
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    stream.options = {"preset": "ultrafast", "crf": "10", "x264-params": "interlaced=1:tff=1"}
    frames = []
    for i in range(num_frames):
        img = np.full((height, width, 3), 40, np.uint8)
        for parity, late in ((0, 0.0), (1, 0.5)):
            x = int((i + late) * 4) % width
            img[parity::2, x:x + 8] = 220
        frames.append(_rgb_frame(img, i))
    _encode(container, stream, frames)
    container.close()
    return path


def combing(rgb: np.ndarray) -> float:
    """Mean difference between each even row and the odd row under it (green): interlaced motion
    shown as it is makes it large; a deinterlaced or progressive frame keeps it near 0."""
    g = rgb[..., 1].astype(np.float64)
    return float(np.abs(g[0:-1:2] - g[1::2]).mean())
