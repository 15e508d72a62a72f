"""``nvdec``: NVIDIA's hardware decoder through PyNvVideoCodec 2.x, frames as torch tensors on the GPU.

PyNvVideoCodec demuxes the file (its own FFmpeg) and NVDEC decodes each packet to an NV12 surface
in GPU memory, handed to torch through DLPack without a copy to the host. The surface is turned into
RGB on the GPU by :mod:`vfm_curator.decoders.yuv` with the stream's matrix and range, scaled and
rotated there; the presentation times, rotation and colour facts come from the container through
PyAV (:func:`vfm_curator.decoders.base.stream_facts`), so they are PyAV's.
"""

from __future__ import annotations

import functools
from typing import Any, Iterator, Sequence

from vfm_curator.decoders.base import Decoder, Size, check_sizes, gpu_library, stream_facts
from vfm_curator.errors import InputError


class NvdecDecoder(Decoder):
    """PyNvVideoCodec's demuxer + NVDEC decoder (``CreateDemuxer`` / ``CreateDecoder``, native NV12
    output in device memory); torch uint8 frames on ``device`` (default: the current CUDA device)."""

    name = "nvdec"
    uses_gpu = True

    def __init__(self, device: str | None = None) -> None:
        super().__init__(device or "cuda")

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return _available()

    def decode(self, path: str, sizes: Sequence[Size] = (None,)) -> Iterator[tuple[float, list[Any]]]:
        import PyNvVideoCodec as nvc
        import torch

        from vfm_curator.decoders.yuv import planes_to_rgb, split_nv12, split_planar

        sizes = check_sizes(sizes)
        facts = stream_facts(path)  # also the clear InputError for a file PyAV cannot read
        device = torch.device(self.device)
        if device.type != "cuda":
            raise ValueError(f"decoder 'nvdec' decodes on a CUDA device, not {self.device!r}")
        gpu = device.index if device.index is not None else torch.cuda.current_device()
        count = 0
        try:
            demuxer = nvc.CreateDemuxer(path)
            decoder = nvc.CreateDecoder(gpuid=gpu, codec=demuxer.GetNvCodecId(), cudacontext=0, cudastream=0,
                                        usedevicememory=True)
        except Exception as exc:  # noqa: BLE001 - PyNvVideoCodec raises its own types and RuntimeError
            raise InputError(f"NVDEC cannot open this video: {type(exc).__name__}: {exc}") from exc
        try:
            for surface in _surfaces(nvc, demuxer, decoder, torch.cuda.current_stream(device)):
                if count >= len(facts.times):
                    break  # a frame the container has no timestamp for (PyAV would not give it)
                planes = torch.from_dlpack(surface)  # (H*3/2, W) NV12 (or planar) uint8, on the GPU
                if planes.ndim == 3 and planes.shape[-1] == 1:
                    planes = planes[..., 0]
                if planes.dtype != torch.uint8:  # P016 & co (10/12-bit): not converted here
                    raise InputError(f"NVDEC gave {getattr(surface, 'format', '?')} ({planes.dtype}); only 8-bit "
                                     "surfaces are converted on the GPU")
                if str(getattr(surface, "format", "NV12")).endswith("NV12"):
                    y, u, v = split_nv12(planes, facts.coded_height)
                else:  # 4:4:4 streams (odd sizes) come as three full planes
                    y, u, v = split_planar(planes, facts.coded_height, chroma="444")
                out = planes_to_rgb(y, u, v, sizes=sizes, rotation=facts.rotation, full_range=facts.full_range,
                                    matrix=facts.matrix)
                yield facts.times[count], out
                count += 1
        except InputError:
            if count == 0:
                raise
        except Exception as exc:  # noqa: BLE001 - as io.video: an error after the first frame ends the stream
            if count == 0:
                raise InputError(f"cannot decode any frame (NVDEC): {type(exc).__name__}: {exc}") from exc


def _surfaces(nvc, demuxer, decoder, stream):
    """Every decoded surface in display order. A surface lives in the decoder's buffer pool until
    the next ``Decode`` call, so torch's stream (converting the last ones) is waited for first."""
    last_size = None
    for packet in demuxer:  # the demuxer ends with an empty packet, which flushes the decoder
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
        return False, f"NVDEC is not usable: {type(exc).__name__}: {exc}"
    if not caps.get("supported", 0):
        return False, "this GPU's NVDEC does not decode 8-bit 4:2:0 H264"
    return True, f"PyNvVideoCodec {getattr(nvc, '__version__', '?')} on {torch.cuda.get_device_name()} ({caps.get('num_decoder_engines', '?')} NVDEC)"
