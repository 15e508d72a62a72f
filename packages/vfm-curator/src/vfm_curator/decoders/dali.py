"""``dali``: NVIDIA DALI's streaming video input (``fn.experimental.inputs.video``, device ``mixed``):
the file's bytes are fed once, NVDEC decodes consecutive sequences of frames into GPU memory as RGB,
and each frame is handed on as a torch tensor on the GPU (a device-to-device copy out of DALI's
reused buffer, never through the host). Rotation, times and sizes as the other backends: the
container's facts through PyAV, scaling on the GPU. DALI's CPU variant refuses H264, so this
backend is only available with a CUDA device.
"""

from __future__ import annotations

import functools
from typing import Any, Iterator, Sequence

from vfm_curator.decoders.base import Decoder, Size, check_sizes, gpu_library, stream_facts
from vfm_curator.errors import InputError

#: frames DALI decodes per pipeline run (one sequence); bounds the GPU memory held at once
SEQUENCE = 32


class DaliDecoder(Decoder):
    """DALI ``fn.experimental.inputs.video`` on device ``mixed``; torch uint8 frames on ``device``."""

    name = "dali"
    uses_gpu = True

    def __init__(self, device: str | None = None) -> None:
        super().__init__(device or "cuda")
        self._pipe = None  # reused from video to video while each is read to its end
        self._clean = False

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return _available()

    def decode(self, path: str, sizes: Sequence[Size] = (None,)) -> Iterator[tuple[float, list[Any]]]:
        import numpy as np
        import torch

        sizes = check_sizes(sizes)
        facts = stream_facts(path)
        device = torch.device(self.device)
        if device.type != "cuda":
            raise ValueError(f"decoder 'dali' decodes on a CUDA device, not {self.device!r}")
        gpu = device.index if device.index is not None else torch.cuda.current_device()
        try:
            if self._pipe is None or not self._clean:  # a video left half-read would hand on its frames
                self._pipe = _pipeline(gpu)
            self._clean = False
            self._pipe.feed_input("video", [np.fromfile(path, dtype=np.uint8)])
        except Exception as exc:  # noqa: BLE001 - DALI raises RuntimeError for most things
            raise InputError(f"DALI cannot open this video: {type(exc).__name__}: {exc}") from exc
        count, total = 0, len(facts.times)
        with torch.cuda.device(gpu):
            while count < total:
                try:
                    (batch,) = self._pipe.run()
                    frames = _to_torch(batch[0], gpu)  # (F, H, W, 3) uint8, a copy DALI will not reuse
                except Exception as exc:  # noqa: BLE001 - as io.video: an error after the first frame ends it
                    if count == 0:
                        raise InputError(f"cannot decode any frame (DALI): {type(exc).__name__}: {exc}") from exc
                    return
                if frames.shape[0] == 0:
                    return
                for i, frame in enumerate(frames):
                    if count >= total:
                        break
                    yield facts.times[count], _finish(frame, sizes, facts)
                    count += 1
                # read to the end, in step with the container (every frame of ceil(total / SEQUENCE)
                # sequences used): the next video may reuse the pipeline
                used_all = i == len(frames) - 1 and count == total
                self._clean = used_all and (len(frames) < SEQUENCE or total % SEQUENCE == 0)


def _finish(frame, sizes, facts) -> list:
    """A decoded (H, W, 3) RGB frame at the requested display sizes, upright."""
    import torch
    import torch.nn.functional as F

    k = int(round(facts.rotation / 90.0)) % 4
    if k and tuple(frame.shape[:2]) != (facts.coded_height, facts.coded_width):
        k = 0  # DALI already applied the display matrix
    out = []
    for size in sizes:
        img = frame
        if size is not None:
            w, h = size if k % 2 == 0 else (size[1], size[0])
            if (h, w) != tuple(frame.shape[:2]):
                x = frame.permute(2, 0, 1)[None].float()
                shrink = h < frame.shape[0] or w < frame.shape[1]
                x = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False, antialias=shrink)
                img = x[0].permute(1, 2, 0).round_().clamp_(0, 255).to(torch.uint8)
        out.append(torch.rot90(img, k=k, dims=(0, 1)).contiguous() if k else img)
    return out


def _to_torch(sample, gpu: int):
    import torch

    try:
        view = torch.from_dlpack(sample)
    except Exception:  # noqa: BLE001 - older DALI: the CUDA array interface
        view = torch.as_tensor(sample, device=f"cuda:{gpu}")
    return view.clone()


def _pipeline(gpu: int):
    from nvidia.dali import fn, pipeline_def

    def video():
        return fn.experimental.inputs.video(name="video", sequence_length=SEQUENCE, device="mixed",
                                            last_sequence_policy="partial", blocking=False)

    # one sequence per run, never scheduled ahead of the input (running past the video's end is an
    # error); DALI versions whose executor refuses these switches get one prefetch slot instead
    try:
        pipe = pipeline_def(video, batch_size=1, num_threads=2, device_id=gpu, prefetch_queue_depth=1,
                            exec_async=False, exec_pipelined=False)()
        pipe.build()
    except (TypeError, ValueError, RuntimeError):
        pipe = pipeline_def(video, batch_size=1, num_threads=2, device_id=gpu, prefetch_queue_depth=1)()
        pipe.build()
    return pipe


@functools.lru_cache(maxsize=1)
def _available() -> tuple[bool, str]:
    dali, why = gpu_library("nvidia.dali", "nvidia-dali", torch_use="DALI frames are handed on as torch tensors",
                            no_cuda="no CUDA device is visible (DALI's CPU variant does not decode H264)")
    if dali is None:
        return False, why
    import torch

    return True, f"nvidia-dali {getattr(dali, '__version__', '?')} (mixed) on {torch.cuda.get_device_name()}"
