"""Encoding frames to H264 mp4 bytes with PyAV: libx264 (CRF, preset) or NVENC when present."""

from __future__ import annotations

import io
from fractions import Fraction
from pathlib import Path

import numpy as np

_NVENC_OK: bool | None = None


def nvenc_available() -> bool:
    """Whether ``h264_nvenc`` can really open here (the codec may be built in with no GPU present)."""
    global _NVENC_OK
    if _NVENC_OK is None:
        try:
            encode_h264([np.zeros((64, 64, 3), np.uint8)], 25.0, codec="h264_nvenc")
            _NVENC_OK = True
        except Exception:
            _NVENC_OK = False
    return _NVENC_OK


def pick_codec(encoder: str) -> str:
    """``auto`` -> ``h264_nvenc`` when it works here, else ``libx264``; other names pass through."""
    if encoder == "auto":
        return "h264_nvenc" if nvenc_available() else "libx264"
    if encoder not in ("libx264", "h264_nvenc"):
        raise ValueError(f"unknown encoder {encoder!r}; available: auto, libx264, h264_nvenc")
    return encoder


def even_crop(frame: np.ndarray) -> np.ndarray:
    """H264 in yuv420p needs even sides: drop the last row/column of odd-sized frames."""
    h, w = frame.shape[:2]
    return frame[: h - h % 2, : w - w % 2]


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

    def _open(self, width: int, height: int) -> None:
        self.stream = self.container.add_stream(self.codec, rate=self.rate)
        self.stream.width, self.stream.height, self.stream.pix_fmt = width, height, "yuv420p"
        self.stream.codec_context.time_base = 1 / self.rate
        if self.codec == "libx264":
            self.stream.options = {"crf": str(self.crf), "preset": self.preset, "threads": str(self.threads)}
        else:  # NVENC: constant-quality mode, the closest thing to CRF
            self.stream.options = {"rc": "vbr", "cq": str(self.crf), "preset": "p4"}

    def write(self, frame: np.ndarray) -> None:
        import av

        frame = even_crop(frame)
        if self.stream is None:
            self._open(frame.shape[1], frame.shape[0])
        vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
        vf.pts = self.count
        vf.time_base = 1 / self.rate
        self.count += 1
        for packet in self.stream.encode(vf):
            self.container.mux(packet)

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
    packet late and is never longer than the span.
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
            a_out = out.add_stream_from_template(a_in)
            for packet in clip.demux(v_in):
                if packet.dts is None:  # the demuxer's end-of-stream flush packet
                    continue
                packet.stream = v_out
                out.mux(packet)
            if offset > 0:
                src.seek(offset, stream=a_in, backward=True)
            for packet in src.demux(a_in):
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
        return out_buffer.getvalue()
