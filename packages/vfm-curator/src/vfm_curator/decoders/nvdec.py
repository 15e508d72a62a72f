"""``nvdec``: NVIDIA's hardware decoder through PyNvVideoCodec 2.x, frames as torch tensors on the GPU.

PyNvVideoCodec demuxes the file (its own FFmpeg) and NVDEC decodes each packet to an NV12 surface
in GPU memory, handed to torch through DLPack without a copy to the host. The surface is turned into
RGB on the GPU by :mod:`vfm_curator.decoders.yuv` with the stream's matrix and range, scaled and
rotated there; the presentation times, rotation and colour facts come from the container through
PyAV (:func:`vfm_curator.decoders.base.stream_facts`), so they are PyAV's, and each frame takes the
container time its own timestamp matches (:class:`~vfm_curator.decoders.base.FrameTimes`).

Calls and keywords as PyNvVideoCodec 2.2.4 has them (read from its bindings, docs/decoders.md).
"""

from __future__ import annotations

import functools
import re
from typing import Any, Iterator, Sequence

from vfm_curator.decoders.base import (Decoder, FrameTimes, Size, check_sizes, gpu_library, one_line,
                                       stream_facts)
from vfm_curator.errors import InputError


class NvdecDecoder(Decoder):
    """PyNvVideoCodec's demuxer + NVDEC decoder (``CreateDemuxer`` / ``CreateDecoder``, native NV12
    output in device memory); torch uint8 frames on ``device`` (default: the current CUDA device)."""

    name = "nvdec"
    uses_gpu = True

    def __init__(self, device: str | None = None) -> None:
        super().__init__(device or "cuda")
        self.timeline: FrameTimes | None = None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return _available()

    def decode(self, path: str, sizes: Sequence[Size] = (None,)) -> Iterator[tuple[float, list[Any]]]:
        import PyNvVideoCodec as nvc
        import torch

        from vfm_curator.decoders.yuv import planes_to_rgb, split_surface

        sizes = check_sizes(sizes)
        facts = stream_facts(path)  # also the clear InputError for a file PyAV cannot read
        device = torch.device(self.device)
        if device.type != "cuda":
            raise ValueError(f"decoder 'nvdec' decodes on a CUDA device, not {self.device!r}")
        gpu = device.index if device.index is not None else torch.cuda.current_device()
        demuxer, decoder = _open(nvc, path, gpu, facts)
        self.timeline = timeline = FrameTimes(facts.times, _time_base(demuxer))  # kept: what the last video did
        count = 0
        try:
            for surface in _surfaces(nvc, demuxer, decoder, torch.cuda.current_stream(device)):
                t = timeline.time_of(_pts(surface))
                if t is None:
                    if timeline.done:
                        break  # a frame the container has no time for (PyAV would not give it)
                    continue  # pre-roll the container discards
                try:
                    planes = torch.from_dlpack(surface)  # NV12 (H*3/2, W) uint8 on the GPU, no copy
                    y, u, v = split_surface(planes, surface.format, facts.coded_height)
                except Exception as exc:  # noqa: BLE001 - DLPack export or an unconverted format
                    raise InputError(f"NVDEC frame -> torch (torch.from_dlpack(DecodedFrame), format "
                                     f"{getattr(surface, 'format', '?')}): {one_line(exc)}") from exc
                out = planes_to_rgb(y, u, v, sizes=sizes, rotation=facts.rotation, full_range=facts.full_range,
                                    matrix=facts.matrix)
                yield t, out
                count += 1
        except InputError:
            if count == 0:
                raise
        except Exception as exc:  # noqa: BLE001 - as io.video: an error after the first frame ends the stream
            if count == 0:
                raise InputError(f"cannot decode any frame (NVDEC, PyNvDecoder.Decode): {one_line(exc)}") from exc


def chroma_and_depth(pix_fmt: str) -> tuple[str, int]:
    """PyNvVideoCodec's ``cudaVideoChromaFormat`` member name (``"420"``, ``"422"``, ``"444"``,
    ``"Monochrome"``) and the bit depth of an FFmpeg pixel format name as PyAV reports it
    (``yuv420p`` -> ``("420", 8)``, ``yuv444p10le`` -> ``("444", 10)``). PyNvVideoCodec's own
    ``demuxer.ChromaFormat()`` says 4:2:0 for an H264 4:4:4 stream (2.2.4), so PyAV's word is used."""
    name = pix_fmt.lower()
    match = re.search(r"(\d+)(le|be)$", name)
    depth = int(match.group(1)) if match else 8
    if name.startswith("gray"):
        return "Monochrome", depth
    for chroma in ("444", "422", "420"):
        if chroma in name:
            return chroma, depth
    if name.startswith(("nv12", "nv21", "p010", "p016")):  # semi-planar 4:2:0
        return "420", depth
    raise ValueError(f"pixel format {pix_fmt!r} is not one NVDEC decodes (4:2:0, 4:2:2, 4:4:4 or monochrome YUV)")


def _check_caps(nvc, gpu: int, codec, facts) -> None:
    """An InputError, before any decoding, when this GPU's NVDEC does not decode the stream (codec,
    chroma format, bit depth, size), as ``PyNvVideoCodec.GetDecoderCaps`` says: the decode stage then
    decodes it with ``pyav``. (What NVDEC does when handed one it cannot decode is unknown here.)"""
    try:
        chroma, depth = chroma_and_depth(facts.pix_fmt)
    except ValueError as exc:
        raise InputError(f"NVDEC: {exc}") from None
    try:
        caps = _caps(nvc, gpu, codec, chroma, depth)
    except Exception as exc:  # noqa: BLE001
        raise InputError(f"NVDEC cannot tell whether it decodes this video (PyNvVideoCodec.GetDecoderCaps): "
                         f"{one_line(exc)}") from exc
    what = f"{getattr(codec, 'name', codec)} {chroma} {depth}-bit"
    if not caps.get("supported", 0):
        raise InputError(f"NVDEC on this GPU does not decode {what} (PyNvVideoCodec.GetDecoderCaps)")
    w, h = facts.coded_width, facts.coded_height
    lo = (caps.get("width_min", 0), caps.get("height_min", 0))
    hi = (caps.get("width_max", w) or w, caps.get("height_max", h) or h)
    if not (lo[0] <= w <= hi[0] and lo[1] <= h <= hi[1]):
        raise InputError(f"NVDEC on this GPU decodes {what} from {lo[0]}x{lo[1]} to {hi[0]}x{hi[1]}, "
                         f"not {w}x{h} (PyNvVideoCodec.GetDecoderCaps)")


@functools.lru_cache(maxsize=64)
def _caps(nvc, gpu: int, codec, chroma: str, depth: int) -> dict:
    return nvc.GetDecoderCaps(gpuid=gpu, codec=codec, chromaformat=nvc.cudaVideoChromaFormat.__members__[chroma],
                              bitdepth=depth)


def _open(nvc, path: str, gpu: int, facts):
    """PyNvVideoCodec's demuxer and an NVDEC decoder for its codec, output NV12 in device memory.
    Their errors (``PyNvVCException``, several lines) become one-line InputErrors naming the call."""
    try:
        demuxer = nvc.CreateDemuxer(filename=path)
        codec = demuxer.GetNvCodecId()
    except Exception as exc:  # noqa: BLE001 - PyNvVCException, RuntimeError
        raise InputError(f"NVDEC cannot open this video (PyNvVideoCodec.CreateDemuxer): {one_line(exc)}") from exc
    _check_caps(nvc, gpu, codec, facts)
    try:
        # keywords as PyNvVideoCodec 2.2.4 names them; outputColorType stays NATIVE (NV12 for 8-bit
        # 4:2:0), latency NATIVE (display order). A CUDA *driver* error in here ends the process
        # (PyNvVideoCodec logs "[FATAL] CUDA driver API error" and exits) - it cannot be caught.
        decoder = nvc.CreateDecoder(gpuid=gpu, codec=codec, cudacontext=0, cudastream=0, usedevicememory=True)
    except Exception as exc:  # noqa: BLE001
        raise InputError(f"NVDEC cannot decode this video (PyNvVideoCodec.CreateDecoder, codec {codec}): "
                         f"{one_line(exc)}") from exc
    return demuxer, decoder


def _time_base(demuxer) -> float | None:
    """Seconds per timestamp tick of the demuxer's video stream (``GetTimebaseNum/Den``), if known."""
    try:
        num, den = int(demuxer.GetTimebaseNum()), int(demuxer.GetTimebaseDen())
    except Exception:  # noqa: BLE001 - a PyNvVideoCodec without these: frames are counted instead
        return None
    return num / den if num > 0 and den > 0 else None


def _pts(surface) -> int | None:
    """A decoded frame's presentation timestamp in the demuxer's ticks (``DecodedFrame.getPTS()``)."""
    try:
        return int(surface.getPTS())
    except Exception:  # noqa: BLE001 - not there / not a number: FrameTimes counts frames instead
        return None


def _surfaces(nvc, demuxer, decoder, stream):
    """Every decoded surface in display order. A surface lives in the decoder's buffer pool until
    a later ``Decode`` call, so torch's stream (converting the last ones) is waited for first.
    PyNvVideoCodec's demuxer ends with an empty packet (``bsl == 0``), which flushes the decoder
    (seen with 2.2.4); one that does not is followed by an explicit empty ``PacketData``."""
    last_size = None
    for packet in demuxer:
        stream.synchronize()
        last_size = packet.bsl
        yield from decoder.Decode(packet)
    if last_size:  # it did not end with one: flush explicitly
        stream.synchronize()
        yield from decoder.Decode(nvc.PacketData())


@functools.lru_cache(maxsize=1)
def _available() -> tuple[bool, str]:
    nvc, why = gpu_library("PyNvVideoCodec", "PyNvVideoCodec", torch_use="NVDEC frames are torch tensors")
    if nvc is None:
        return False, why
    import torch

    try:
        # defaults: 8-bit 4:2:0; the codec named, as the H264 streams this product writes
        caps = nvc.GetDecoderCaps(gpuid=torch.cuda.current_device(), codec=nvc.cudaVideoCodec.H264)
    except Exception as exc:  # noqa: BLE001 - no libnvcuvid, a driver without video capability
        return False, f"NVDEC is not usable (PyNvVideoCodec.GetDecoderCaps): {one_line(exc, first=True)}"
    if not caps.get("supported", 0):
        return False, "this GPU's NVDEC does not decode 8-bit 4:2:0 H264"
    return True, f"PyNvVideoCodec {getattr(nvc, '__version__', '?')} on {torch.cuda.get_device_name()} ({caps.get('num_decoder_engines', '?')} NVDEC)"
