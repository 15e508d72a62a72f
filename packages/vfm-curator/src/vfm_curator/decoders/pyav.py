"""The PyAV backends: ``pyav`` (FFmpeg on the CPU, the default and the reference every other backend
is compared with) and ``pyav-cuda`` (the same with FFmpeg's CUDA hwaccel, frames copied back to the
host; counted as available only where a probe decodes a frame on the GPU without falling back)."""

from __future__ import annotations

import functools
from contextlib import closing
from typing import Any, Iterator, Sequence

from vfm_curator.decoders.base import Decoder, Size, check_sizes
from vfm_curator.errors import InputError


class PyAVDecoder(Decoder):
    """FFmpeg through PyAV on the CPU: exactly :func:`vfm_curator.io.video.iter_frames` (the same
    frames, times and error rules); numpy frames, ``device == "cpu"``."""

    name = "pyav"
    hwaccel: str | None = None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            import av
        except ImportError:
            return False, "PyAV is not installed"
        return True, f"PyAV {av.__version__} (FFmpeg on the CPU)"

    def decode(self, path: str, sizes: Sequence[Size] = (None,)) -> Iterator[tuple[float, list[Any]]]:
        import av
        from av.video.reformatter import VideoReformatter

        from vfm_curator.io.video import _decoded, _to_rgb

        sizes = check_sizes(sizes)
        # one reformatter per size: FFmpeg's scaler is set up once per stream, not per frame
        reformatters = [VideoReformatter() for _ in sizes]
        count = 0
        with closing(_decoded(path, self.hwaccel)) as decoded:
            for t, frame in decoded:
                try:
                    out = [_to_rgb(frame, *(s or (None, None)), r) for s, r in zip(sizes, reformatters)]
                except (av.FFmpegError, ValueError) as exc:  # as a decoding error (io.video.iter_frames)
                    if count == 0:
                        raise InputError(f"cannot decode any frame: {exc}") from exc
                    return
                count += 1
                yield t, out


class PyAVCudaDecoder(PyAVDecoder):
    """PyAV with FFmpeg's CUDA hwaccel (NVDEC), frames transferred to the host (NV12) and converted
    there as ``pyav`` converts its own (:func:`vfm_curator.io.video._to_rgb`), so they are PyAV's
    frames; ``device == "cpu"`` (numpy)."""

    name = "pyav-cuda"
    hwaccel = "cuda"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        ok, why = PyAVDecoder.available()
        if not ok:
            return ok, why
        return _cuda_hwaccel_probe()


@functools.lru_cache(maxsize=1)
def _cuda_hwaccel_probe() -> tuple[bool, str]:
    """Decode a tiny H264 file with ``hwaccel=cuda`` and no software fallback: only a frame that
    came off the GPU counts (FFmpeg lists ``cuda`` as a device type whether or not a GPU is there)."""
    import os
    import tempfile

    import av
    from av.codec.hwaccel import HWAccel, hwdevices_available

    if "cuda" not in hwdevices_available():
        return False, "this FFmpeg build has no CUDA hwaccel"
    from vfm_curator.synth import make_video

    with tempfile.TemporaryDirectory(prefix="vfm-hwaccel-") as tmp:
        path = os.path.join(tmp, "probe.mp4")
        make_video(path, [4], width=64, height=64)
        try:
            with av.open(path, hwaccel=HWAccel(device_type="cuda", allow_software_fallback=False)) as container:
                stream = container.streams.video[0]
                for _ in container.decode(stream):
                    if stream.codec_context.is_hwaccel:
                        return True, f"PyAV {av.__version__} with FFmpeg's CUDA hwaccel (decoded on the GPU)"
                    break
        except Exception as exc:  # noqa: BLE001 - whatever FFmpeg says, the answer is "not here"
            return False, f"FFmpeg's CUDA hwaccel does not decode here ({type(exc).__name__}: {exc})"
    return False, "FFmpeg's CUDA hwaccel decoded on the CPU (no usable NVDEC device)"
