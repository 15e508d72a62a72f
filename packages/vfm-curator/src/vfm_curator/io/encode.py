"""Encoding frames to H264 mp4 bytes with PyAV: libx264 (CRF, preset) or NVENC when present."""

from __future__ import annotations

import glob
import io
import logging
from fractions import Fraction
from pathlib import Path

import numpy as np

from vfm_plugins.x264 import x264_options

ENCODERS = ("auto", "libx264", "h264_nvenc")
log = logging.getLogger("vfm_curator.encode")
#: the probe's answer in this process: None (not asked yet), or (works, why not)
_NVENC: tuple[bool, str] | None = None
_NOTICE_GIVEN = False


def nvenc_probe() -> tuple[bool, str]:
    """Whether an ``h264_nvenc`` encoder really opens here, and why not: the codec may be built into
    FFmpeg with no NVIDIA driver, no GPU, or a GPU without a video encoder (an H100). Tried once per
    process on a tiny frame, with the options the writer uses."""
    global _NVENC
    if _NVENC is None and not glob.glob("/dev/nvidia[0-9]*"):
        # no NVIDIA device node: no driver can open an encoder (saves opening FFmpeg's NVENC, ~0.2 s
        # per worker process, on every CPU-only machine)
        _NVENC = (False, "no NVIDIA GPU device (/dev/nvidia*) here")
    if _NVENC is None:
        try:
            encode_h264([np.zeros((144, 256, 3), np.uint8)], 25.0, codec="h264_nvenc")
            _NVENC = (True, "")
        except Exception as exc:  # noqa: BLE001 - any failure to open or encode means no NVENC
            _NVENC = (False, f"{type(exc).__name__}: {exc}")
    return _NVENC


def nvenc_available() -> bool:
    """Whether ``h264_nvenc`` can really open here (see :func:`nvenc_probe`)."""
    return nvenc_probe()[0]


def pick_codec(encoder: str) -> str:
    """``auto`` -> ``h264_nvenc`` when the probe opens it here, else ``libx264`` with a one-line
    notice (logged once per process); ``libx264`` as named; ``h264_nvenc`` when it opens here, else
    a ``ValueError`` saying why."""
    global _NOTICE_GIVEN
    if encoder not in ENCODERS:
        raise ValueError(f"unknown encoder {encoder!r}; accepted: {', '.join(ENCODERS)}")
    if encoder == "libx264":
        return encoder
    ok, why = nvenc_probe()
    if encoder == "h264_nvenc":
        if not ok:
            raise ValueError(f"encoder 'h264_nvenc' cannot open here ({why}); NVENC needs an NVIDIA GPU with a "
                             f"video encoder and its driver: use encoder = 'auto' (falls back to libx264) or 'libx264'")
        return encoder
    if ok:
        return "h264_nvenc"
    if not _NOTICE_GIVEN:
        _NOTICE_GIVEN = True
        log.warning("transcode: NVENC is not available here (%s); encoding with libx264", _short(why))
    return "libx264"


def _short(why: str) -> str:
    return why if len(why) <= 120 else why[:117] + "..."


def even_crop(frame: np.ndarray) -> np.ndarray:
    """H264 in yuv420p needs even sides: drop the last row/column of odd-sized frames."""
    h, w = frame.shape[:2]
    return frame[: h - h % 2, : w - w % 2]


#: the colour tags of a clip encoded from RGB frames (AVColorSpace SMPTE170M = BT.601, AVColorRange MPEG)
RGB_INPUT_MATRIX, RGB_INPUT_RANGE = 6, 1


class H264Writer:
    """Streams (H, W, 3) uint8 RGB frames into an mp4 at a constant ``fps``: in memory, or into the
    file ``path`` when given (so a clip is never held whole). Frame ``k`` gets pts ``k`` so the
    output has exactly as many frames as were written. No audio."""

    def __init__(self, fps: float, *, codec: str = "libx264", crf: int = 20, preset: str = "veryfast",
                 path: str | None = None, threads: int = 0) -> None:
        import av

        self.path = None if path is None else Path(path)
        self.buffer = io.BytesIO() if path is None else None
        self.container = av.open(self.buffer if path is None else str(path), "w", format="mp4")
        self.rate = Fraction(fps).limit_denominator(1001) if fps > 0 else Fraction(25)
        self.codec, self.crf, self.preset, self.threads = codec, crf, preset, int(threads)
        self.stream = None
        self.count = 0
        self.decoded = False  # frames are handed over decoded (write_decoded), not as RGB

    def _open(self, width: int, height: int) -> None:
        self.stream = self.container.add_stream(self.codec, rate=self.rate)
        self.stream.width, self.stream.height, self.stream.pix_fmt = width, height, "yuv420p"
        self.stream.codec_context.time_base = 1 / self.rate
        if self.codec == "libx264":
            # the same frames, the same bytes (vfm_plugins.x264)
            self.stream.options = x264_options({"crf": str(self.crf), "preset": self.preset, "threads": str(self.threads)})
        else:  # NVENC: constant quality (the closest thing to CRF, no bitrate cap) and libx264's High profile
            self.stream.options = {"rc": "vbr", "cq": str(self.crf), "b": "0", "preset": "p4", "profile": "high"}

    def write(self, frame: np.ndarray, source=None) -> None:
        """Encode an (H, W, 3) uint8 RGB frame. ``source``, the decoded ``av.VideoFrame`` it was made
        from, gives the clip its primaries and transfer (RGB made with the source's matrix keeps
        both: an HDR source's PQ or HLG clip stays tagged so); read on the first frame only."""
        import av

        frame = even_crop(frame)
        if self.stream is None:
            self._open(frame.shape[1], frame.shape[0])
            # the encoder turns RGB into YUV with BT.601's matrix, limited range: say so in the stream,
            # or players guess from the size (BT.709 from 720p up: every colour ~1-3 levels off)
            context = self.stream.codec_context
            context.colorspace, context.color_range = RGB_INPUT_MATRIX, RGB_INPUT_RANGE
            if source is not None:
                context.color_primaries, context.color_trc = source.color_primaries, source.color_trc
        self._encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24"))

    def _encode(self, frame) -> None:
        """Frame ``count`` gets pts ``count`` (so the clip has exactly the frames written)."""
        frame.pts = self.count
        frame.time_base = 1 / self.rate
        self.count += 1
        for packet in self.stream.encode(frame):
            self.container.mux(packet)

    def write_decoded(self, frame) -> bool:
        """Encode a decoded ``av.VideoFrame`` as it is when it is 8-bit 4:2:0 planar, limited range,
        upright and of even size: no RGB round trip (exact colours, about 6 ms less per 720p frame),
        and the clip carries the source's colour tags (matrix, primaries, transfer). Returns False,
        encoding nothing, for any other frame (the caller converts it to RGB and calls :meth:`write`),
        and for every frame of a writer that :meth:`write` opened (its stream is tagged as RGB input)."""
        from av.video.frame import PictureType

        passes = (frame.format.name == "yuv420p" and not int(round(frame.rotation)) % 360
                  and frame.width % 2 == 0 and frame.height % 2 == 0 and int(frame.color_range) != 2)  # 2 = full (JPEG) range
        if self.stream is None:
            if not passes:
                return False
            self._open(frame.width, frame.height)
            context = self.stream.codec_context
            context.colorspace, context.color_primaries, context.color_trc = frame.colorspace, frame.color_primaries, frame.color_trc
            self.decoded = True
        elif not (passes and self.decoded and (frame.width, frame.height) == (self.stream.width, self.stream.height)):
            return False
        frame.pict_type = PictureType.NONE  # the encoder places its own keyframes, not the source's
        self._encode(frame)
        return True

    def close(self) -> bytes | None:
        """Flush and close; the mp4's bytes when written in memory, else None (they are in ``path``)."""
        if self.stream is not None:
            for packet in self.stream.encode():
                self.container.mux(packet)
        self.container.close()
        return self.buffer.getvalue() if self.buffer is not None else None


def encode_h264(frames, fps: float, **kwargs) -> bytes:
    writer = H264Writer(fps, **kwargs)
    for frame in frames:
        writer.write(frame)
    return writer.close()


def resize(frame: np.ndarray, max_side: int) -> np.ndarray:
    """Scale an (H, W, 3) uint8 frame so its longer side is at most ``max_side`` (FFmpeg's scaler)."""
    import av

    h, w = frame.shape[:2]
    scale = min(1.0, max_side / max(h, w))
    if scale >= 1.0:
        return frame
    nw, nh = max(2, round(w * scale) // 2 * 2), max(2, round(h * scale) // 2 * 2)
    vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
    return vf.reformat(width=nw, height=nh, format="rgb24").to_ndarray()


def mux_audio(clip_mp4: bytes | str, source: str, start_s: float, end_s: float) -> bytes:
    """``clip_mp4`` (bytes, or a file's path) with the source's first audio track over ``[start_s, end_s)`` copied in, without
    re-encoding, its times shifted to start at 0. A source without audio gives the clip unchanged.

    Audio packets are copied whole (an AAC packet is ~20 ms), so the track may start up to one
    packet late and is never longer than the span. A codec that MP4 cannot hold (A-law/mu-law
    PCM, ADPCM, WMA, ...: old cameras' .avi/.mov, .wmv) is re-encoded to AAC instead, the span's
    samples only.
    """
    import av

    with av.open(source) as src:
        if not src.streams.audio:
            return clip_mp4 if isinstance(clip_mp4, bytes) else Path(clip_mp4).read_bytes()
        a_in = src.streams.audio[0]
        offset = int(start_s / a_in.time_base)
        out_buffer = io.BytesIO()
        clip_in = io.BytesIO(clip_mp4) if isinstance(clip_mp4, bytes) else str(clip_mp4)
        with av.open(clip_in) as clip, av.open(out_buffer, "w", format="mp4") as out:
            v_in = clip.streams.video[0]
            v_out = out.add_stream_from_template(v_in)
            try:
                a_out, copy = out.add_stream_from_template(a_in), True
            except ValueError:  # "'mp4' format does not support 'pcm_alaw' codec"
                a_out, copy = _aac_stream(out, a_in), False
            for packet in clip.demux(v_in):
                if packet.dts is None:  # the demuxer's end-of-stream flush packet
                    continue
                packet.stream = v_out
                out.mux(packet)
            if offset > 0:
                try:
                    src.seek(offset, stream=a_in, backward=True)
                except av.FFmpegError:  # a stream that cannot seek: read from the start
                    pass
            for packet in src.demux(a_in) if copy else ():
                if packet.pts is None:
                    continue
                start = float(packet.pts * a_in.time_base)
                if start < start_s:
                    continue
                if start + float((packet.duration or 0) * a_in.time_base) > end_s:
                    break
                packet.pts -= offset
                packet.dts = packet.pts
                packet.stream = a_out
                out.mux(packet)
            if not copy:
                _reencode_audio(src, a_in, a_out, out, start_s, end_s)
        return out_buffer.getvalue()


def _aac_stream(out, a_in):
    """An AAC stream in ``out`` with ``a_in``'s sample rate and number of channels (mono, stereo, 5.1...)."""
    context = a_in.codec_context
    # the channels' standard layout: a file's own may be unordered ("1 channels"), which AAC refuses
    channels = max(1, min(int(context.channels or 2), 8))
    layout = {1: "mono", 2: "stereo", 3: "2.1", 4: "quad", 5: "5.0", 6: "5.1", 7: "6.1", 8: "7.1"}[channels]
    rate = int(context.sample_rate or 48000)
    stream = out.add_stream("aac", rate=rate, layout=layout)
    stream.codec_context.time_base = Fraction(1, rate)
    return stream


def _reencode_audio(src, a_in, a_out, out, start_s: float, end_s: float) -> None:
    """Decode ``a_in``'s samples in ``[start_s, end_s)`` and encode them to ``a_out`` (AAC) from time 0."""
    import av
    from av.audio.resampler import AudioResampler

    context = a_out.codec_context
    rate = context.sample_rate
    resampler = AudioResampler(format=context.format.name, layout=context.layout.name, rate=rate,
                               frame_size=context.frame_size or 1024)
    first, last = round(start_s * rate), round(end_s * rate)  # the span in samples of the output rate
    written = 0

    def encode(frames) -> None:
        nonlocal written
        for frame in frames:
            if written >= last - first:
                return
            if written + frame.samples > last - first:  # the span's end: never longer than the clip
                kept = np.ascontiguousarray(frame.to_ndarray()[:, : last - first - written])
                frame = av.AudioFrame.from_ndarray(kept, format=frame.format.name, layout=frame.layout.name)
                frame.sample_rate = rate
            frame.pts, frame.time_base = written, Fraction(1, rate)
            written += frame.samples
            for packet in a_out.encode(frame):
                out.mux(packet)

    try:
        for frame in src.decode(a_in):
            if frame.time is None:
                continue
            begin = round(frame.time * rate)
            if begin + frame.samples <= first:
                continue
            if begin >= last:
                break
            encode(resampler.resample(frame))
    except av.FFmpegError:  # damaged audio: keep what was decoded
        pass
    encode(resampler.resample(None))
    for packet in a_out.encode():
        out.mux(packet)
