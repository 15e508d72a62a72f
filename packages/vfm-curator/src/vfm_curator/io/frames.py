"""Decoding a video's frames in presentation order, upright (rotation applied) with their times:
every frame (:func:`iter_frames`), every frame with its RGB converted only on demand
(:func:`iter_decoded`), or a few chosen ones (:func:`frames_at`)."""

from __future__ import annotations

from contextlib import closing
from typing import Iterator

import numpy as np

from vfm_curator.errors import InputError
from vfm_curator.io.codec_resources import threads_given
from vfm_curator.io.container import _ffmpeg_reason, open_container, video_stream
from vfm_curator.io.deinterlace import _Deinterlace
from vfm_curator.io.probing import display_width, sample_aspect
from vfm_curator.io.rgb import _to_rgb


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
