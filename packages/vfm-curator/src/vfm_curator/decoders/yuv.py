"""Decoded YUV planes -> upright RGB uint8 frames with torch, on whatever device the planes are on.

The GPU backends get NV12 (or planar) surfaces from NVDEC and turn them into the frames PyAV gives,
following what :func:`vfm_curator.io.video._to_rgb` has swscale do: at full size, chroma is
repeated over its 2x2 pixels; scaled, luma and chroma are resized straight to the output size as
swscale resizes them (:func:`resize_planes`: an area average for the detection sizes, bilinear
otherwise); then the stream's matrix (BT.601 unless it says BT.709/BT.2020) and range (limited
16-235 unless full), rounded to uint8 (swscale's default paths truncated, 1-2 levels darker); then
the display rotation. Measured against PyAV on the CPU (tests/curator/test_decoders.py,
docs/decoders.md): at most 0.01/255 apart on average and 1/255 at worst at full size; 0.30-0.81/255
on average and 2-4/255 at worst shrunk from 320x192 to 64 wide.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

from vfm_curator.io.video import is_detection_shrink

# Kr, Kb of each matrix (ITU-R BT.601 / BT.709 / BT.2020 non-constant luminance).
_K = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722), "bt2020": (0.2627, 0.0593)}


def split_nv12(surface, height: int):
    """An NV12 surface ``(R * 3 // 2, W)`` uint8 (``R >= height`` rows of luma, possibly padded) ->
    ``y (height, W)`` and ``u, v (ceil(height / 2), W / 2)`` views."""
    rows = surface.shape[0] * 2 // 3
    y = surface[:height]
    uv = surface[rows : rows + (height + 1) // 2]
    return y, uv[:, 0::2], uv[:, 1::2]


#: NVDEC surface formats (PyNvVideoCodec's ``Pixel_Format`` names) converted here, 8-bit only
SURFACE_FORMATS = ("NV12", "YUV444")


def split_surface(surface, pixel_format, height: int):
    """A decoded surface as PyNvVideoCodec 2.x hands it out (``DecodedFrame``, its default ``NATIVE``
    output), seen by torch through DLPack -> ``y, u, v``. ``pixel_format`` is the frame's ``format``
    (``Pixel_Format.NV12``, or its name): NV12 comes as one ``(R * 3 // 2, W)`` uint8 array (luma
    rows, then the interleaved chroma rows), YUV444 (4:4:4 streams) as ``(3 * R, W)``; a trailing
    axis of 1 is accepted. Anything else (P016 for 10/12-bit, NV16/P216 for 4:2:2) is a ValueError
    naming the format and the accepted ones."""
    import torch

    name = str(getattr(pixel_format, "name", pixel_format)).rsplit(".", 1)[-1]
    if name not in SURFACE_FORMATS:
        raise ValueError(f"NVDEC surface format {name} is not converted here; accepted: "
                         f"{', '.join(SURFACE_FORMATS)} (8-bit 4:2:0 and 4:4:4)")
    if surface.ndim == 3 and surface.shape[-1] == 1:
        surface = surface[..., 0]
    rows_needed = height * 3 if name == "YUV444" else height + (height + 1) // 2
    if surface.ndim != 2 or surface.dtype != torch.uint8 or surface.shape[0] < rows_needed:
        raise ValueError(f"a {name} surface of {height} rows should be 2-D uint8 with at least {rows_needed} "
                         f"rows, got shape {tuple(surface.shape)} {surface.dtype}")
    if name == "NV12":
        return split_nv12(surface, height)
    return split_planar(surface, height, chroma="444")


def split_planar(surface, height: int, *, chroma: str = "444"):
    """A planar surface -> ``y, u, v``: ``chroma="444"``: ``(3 * R, W)``; ``"420"``: I420 as
    ``(R * 3 // 2, W)`` (PyAV's ``yuv420p`` array). ``R >= height`` rows of luma (possibly padded)."""
    w = surface.shape[1]
    if chroma == "444":
        rows = surface.shape[0] // 3
        return surface[:height], surface[rows : rows + height], surface[2 * rows : 2 * rows + height]
    if chroma != "420":
        raise ValueError(f"chroma must be '444' or '420', got {chroma!r}")
    rows = surface.shape[0] * 2 // 3
    rest = surface[rows:].reshape(-1)
    crows, cw = rows // 2, (w + 1) // 2
    ch = (height + 1) // 2
    u = rest[: crows * cw].reshape(crows, cw)[:ch]
    v = rest[crows * cw : 2 * crows * cw].reshape(crows, cw)[:ch]
    return surface[:height], u, v


def planes_to_rgb(y, u, v, *, sizes: Sequence, rotation: int = 0, full_range: bool = False,
                  matrix: str = "bt601") -> list:
    """uint8 planes (``y`` (H, W); ``u``, ``v`` full or half size) -> one (h, w, 3) uint8 RGB frame
    per entry of ``sizes`` (``None``: full size; ``(w, h)``: that *display* size, i.e. after
    ``rotation``, given in degrees counter-clockwise as PyAV's ``frame.rotation``)."""
    import torch

    if matrix not in _K:
        raise ValueError(f"unknown colour matrix {matrix!r}; accepted: {', '.join(_K)}")
    kr, kb = _K[matrix]
    k = int(round(rotation / 90.0)) % 4
    height, width = int(y.shape[0]), int(y.shape[1])
    planes = y.float()[None, None]  # (1, 1, H, W)
    chroma = torch.stack([u.float(), v.float()])[None]  # (1, 2, h', w')
    out = []
    for size in sizes:
        if size is None:
            w, h = width, height
        else:
            w, h = int(size[0]), int(size[1])
            if k % 2:
                w, h = h, w  # scale in coded orientation, then rotate
        area = is_detection_shrink(width, height, w, h)  # swscale's flags follow the frame, not the plane
        luma = resize_planes(planes, h, w, area=area)[0, 0]
        if (w, h) == (width, height):  # swscale's unscaled path: each chroma sample covers its pixels
            fy, fx = -(-height // chroma.shape[-2]), -(-width // chroma.shape[-1])
            cbcr = chroma.repeat_interleave(fy, -2).repeat_interleave(fx, -1)[..., :h, :w]
        else:  # scaled: chroma straight to (h, w), as swscale with FULL_CHR_H_INT (io.video.scaled_flags)
            cbcr = resize_planes(chroma, h, w, area=area)
        Y, Cb, Cr = luma, cbcr[0, 0] - 128.0, cbcr[0, 1] - 128.0
        if not full_range:
            Y = (Y - 16.0) * (255.0 / 219.0)
            Cb = Cb * (255.0 / 224.0)
            Cr = Cr * (255.0 / 224.0)
        r = Y + 2.0 * (1.0 - kr) * Cr
        b = Y + 2.0 * (1.0 - kb) * Cb
        g = (Y - kr * r - kb * b) / (1.0 - kr - kb)
        rgb = torch.stack([r, g, b], dim=-1).round_().clamp_(0, 255).to(torch.uint8)  # (h, w, 3)
        if k:
            rgb = torch.rot90(rgb, k=k, dims=(0, 1)).contiguous()
        out.append(rgb)
    return out


def _matrix(matrix: str):
    """RGB = M @ (Y', Cb', Cr'), with Y', Cb', Cr' already range-scaled as in :func:`planes_to_rgb`."""
    kr, kb = _K[matrix]
    kg = 1.0 - kr - kb
    return [[1.0, 0.0, 2.0 * (1.0 - kr)],
            [1.0, -2.0 * kb * (1.0 - kb) / kg, -2.0 * kr * (1.0 - kr) / kg],
            [1.0, 2.0 * (1.0 - kb), 0.0]]


def rgb_to_planes(rgb, *, matrix: str = "bt601", full_range: bool = False):
    """(H, W, 3) RGB (uint8 or float) that was converted from YUV with ``matrix`` and range ->
    the float ``y, u, v`` planes (0-255 code values, full size) it came from, to go through
    :func:`planes_to_rgb` again (with the stream's matrix, scaled as swscale scales). Exact but for
    pixels the first conversion clipped to [0, 255] or rounded. DALI 2.4 hands out RGB converted
    with BT.601 whatever the stream says (its ``VideoColorSpaceConversionKernel`` has only BT.601
    limited, JPEG full range and plain upsampling), chroma upsampled bilinearly."""
    import torch

    if matrix not in _K:
        raise ValueError(f"unknown colour matrix {matrix!r}; accepted: {', '.join(_K)}")
    inv = torch.linalg.inv(torch.tensor(_matrix(matrix), dtype=torch.float64)).to(torch.float32)
    ycc = rgb.float() @ inv.to(rgb.device).T  # (H, W, 3): Y', Cb', Cr' (range-scaled, centred)
    y, cb, cr = ycc.unbind(-1)
    if not full_range:
        y = y * (219.0 / 255.0) + 16.0
        cb = cb * (224.0 / 255.0)
        cr = cr * (224.0 / 255.0)
    return y, cb + 128.0, cr + 128.0


def resize_planes(planes, h: int, w: int, *, area: bool):
    """(N, C, H, W) float -> (N, C, h, w), on the planes' device, as swscale scales
    (:func:`vfm_curator.io.video.scaled_flags`): ``area`` (the caller asks
    :func:`~vfm_curator.io.video.is_detection_shrink` about the frame's size) averages the source
    pixels under each output pixel, weighted by how much of each it covers (``SWS_AREA``'s filter);
    otherwise bilinear, antialiased when shrinking (``SWS_BILINEAR``).

    Not ``F.interpolate(mode="area")``: adaptive pooling takes whole source pixels into each bin, so
    where the factor is not an integer (192 -> 38 rows) it drifts from swscale: 0.56-0.92/255 mean
    and 5-7 at worst against PyAV's small frames, 0.30-0.81 and 2-4 with the fractional weights."""
    import torch.nn.functional as F

    if planes.shape[-2:] == (h, w):
        return planes
    if area:
        device = str(planes.device)
        rows, cols = _area_weights(planes.shape[-2], h, device), _area_weights(planes.shape[-1], w, device)
        return rows @ planes @ cols.T
    shrink = h < planes.shape[-2] or w < planes.shape[-1]
    return F.interpolate(planes, size=(h, w), mode="bilinear", align_corners=False, antialias=shrink)


@lru_cache(maxsize=64)
def _area_weights(src: int, dst: int, device: str):
    """(dst, src) float32: output pixel ``i`` covers source ``[i * src / dst, (i + 1) * src / dst)``;
    each source pixel ``[j, j + 1)`` weighs the length it shares with that span, rows summing to 1."""
    import torch

    lo = torch.arange(dst, dtype=torch.float64) * (src / dst)
    j = torch.arange(src, dtype=torch.float64)
    weights = (torch.minimum(lo[:, None] + src / dst, j + 1) - torch.maximum(lo[:, None], j)).clamp_(min=0)
    return (weights / weights.sum(dim=1, keepdim=True)).to(device=device, dtype=torch.float32)
