"""A decoded frame as upright RGB: YUV -> RGB with exact rounding, scaled to a display size,
square pixels, display rotation applied."""

from __future__ import annotations

import numpy as np

from vfm_curator.io.probing import display_width
from vfm_curator.io.scaling import FULL_SIZE_FLAGS, scaled_flags


def upright(frame_rgb: np.ndarray, rotation: int) -> np.ndarray:
    """Apply a counter-clockwise display rotation (0/90/180/270) to an (H, W, C) frame."""
    k = (int(round(rotation / 90.0))) % 4
    return np.ascontiguousarray(np.rot90(frame_rgb, k=k)) if k else frame_rgb


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
