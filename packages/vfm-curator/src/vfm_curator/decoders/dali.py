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
        self._reader: SequenceReader | None = None  # one pipeline, reused from video to video

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return _available()

    def decode(self, path: str, sizes: Sequence[Size] = (None,)) -> Iterator[tuple[float, list[Any]]]:
        import torch

        sizes = check_sizes(sizes)
        facts = stream_facts(path)
        device = torch.device(self.device)
        if device.type != "cuda":
            raise ValueError(f"decoder 'dali' decodes on a CUDA device, not {self.device!r}")
        gpu = device.index if device.index is not None else torch.cuda.current_device()
        if self._reader is None or self._reader.device_id != gpu:
            self._reader = SequenceReader(gpu)
        with torch.cuda.device(gpu):
            for t, frame in self._reader.frames(path, facts.times):
                yield t, _finish(frame, sizes, facts)


class SequenceReader:
    """A DALI pipeline around ``fn.experimental.inputs.video`` (``device`` ``"mixed"``: NVDEC; ``"cpu"``:
    FFmpeg, which in DALI 2.4 decodes only VP8, VP9 and MJPEG) that reads one video after another.
    :meth:`frames` feeds a file's bytes and runs the pipeline once per ``sequence`` frames; a video
    read to its end (in step with the container's frame count) leaves the pipeline ready for the
    next, anything else (an error, a consumer that stopped early) makes the next video build a
    fresh one, so no frame of one video is ever handed out as another's."""

    def __init__(self, device_id: int | None, device: str = "mixed", sequence: int = SEQUENCE,
                 executors: Sequence[str] = ("simple", "dynamic")) -> None:
        self.device_id, self.device, self.sequence = device_id, device, int(sequence)
        self.executors = tuple(executors)
        self.executor: str | None = None  # the one that built
        self._pipe = None
        self._clean = False

    def _build(self):
        """A fresh pipeline with the first executor (:data:`EXECUTORS`) that builds it; if none
        does, an InputError naming the call and each executor's first line of error."""
        errors = []
        for executor in self.executors:
            try:
                pipe = build_pipeline(self.device_id, self.device, self.sequence, executor=executor)
            except Exception as exc:  # noqa: BLE001 - DALI raises RuntimeError for most things
                errors.append(f"{executor}: {dali_error(exc)}")
                continue
            self.executor = executor
            return pipe
        raise InputError(f"DALI's pipeline does not build (fn.experimental.inputs.video, device {self.device}): "
                         + "; ".join(errors))

    def frames(self, path: str, times: Sequence[float]) -> Iterator[tuple[float, Any]]:
        """``(time, frame)`` for each of ``times`` in order: frame an (H, W, 3) uint8 RGB torch tensor
        (a copy DALI does not reuse), on the pipeline's device, as DALI decodes it (not rotated)."""
        import numpy as np
        import torch

        if self._pipe is None or not self._clean:
            self._pipe = self._build()
        self._clean = False
        try:
            self._pipe.feed_input("video", [np.fromfile(path, dtype=np.uint8)])
        except Exception as exc:  # noqa: BLE001
            raise InputError(f"DALI cannot take this video (Pipeline.feed_input): {dali_error(exc)}") from exc
        count, total, last = 0, len(times), None
        while count < total:
            try:
                if last is not None and last.is_cuda:
                    # DALI reuses its output buffer on the next run (exec_dynamic off): the copy of
                    # the last one, queued on torch's stream, must have finished
                    torch.cuda.current_stream(last.device).synchronize()
                (batch,) = self._pipe.run()
                last = _to_torch(batch[0], self.device_id)  # (F, H, W, 3) uint8, a copy
            except Exception as exc:  # noqa: BLE001 - as io.video: an error after the first frame ends it
                if count == 0:
                    raise InputError(f"cannot decode any frame (DALI, fn.experimental.inputs.video on "
                                     f"{self.device}): {dali_error(exc)}") from exc
                return
            n = int(last.shape[0])
            if n == 0:
                return
            used = 0
            for frame in last:
                if count >= total:
                    break
                yield times[count], frame
                count += 1
                used += 1
            # every frame of ceil(total / sequence) sequences used: DALI is at the video's end too
            self._clean = count == total and used == n and (n < self.sequence or total % self.sequence == 0)


def dali_error(exc: BaseException) -> str:
    """DALI's error on one line: a pipeline error reads "Critical error in pipeline: Error in CPU
    operator ..., which was used in the pipeline definition with the following traceback: <our
    source lines> encountered: <the error> C++ context: ..." (DALI 2.4); the part after
    "encountered:" is what says what went wrong."""
    text = str(exc)
    if "encountered:" in text:
        text = text.split("encountered:", 1)[1].split("C++ context:", 1)[0]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"{type(exc).__name__}: {' '.join(lines)[:500]}" if lines else type(exc).__name__


def _finish(frame, sizes, facts) -> list:
    """A decoded (H, W, 3) RGB frame at the requested display sizes, upright, converted as the other
    backends convert: DALI's RGB (BT.601 whatever the stream says) is taken back to YUV and goes
    through :func:`~vfm_curator.decoders.yuv.planes_to_rgb` with the stream's matrix and range,
    scaled the way swscale scales (luma, then chroma at half width) and truncated like it."""
    from vfm_curator.decoders.yuv import planes_to_rgb, rgb_to_planes

    rotation = facts.rotation
    if rotation % 180 and tuple(frame.shape[:2]) != (facts.coded_height, facts.coded_width):
        rotation = 0  # DALI already applied the display matrix (2.4's CPU variant does not)
    y, u, v = rgb_to_planes(frame, matrix="bt601", full_range=facts.full_range)
    return planes_to_rgb(y, u, v, sizes=sizes, rotation=rotation, full_range=facts.full_range, matrix=facts.matrix)


def _to_torch(sample, device_id: int | None):
    """A DALI ``TensorGPU``/``TensorCPU`` as a torch tensor of its own (DALI 2.4 tensors export
    ``__dlpack__``; ``__cuda_array_interface__`` for older ones)."""
    import torch

    try:
        view = torch.from_dlpack(sample)
    except Exception:  # noqa: BLE001 - older DALI: the CUDA array interface
        view = torch.as_tensor(sample, device=f"cuda:{device_id or 0}")
    if view.ndim != 4 or view.shape[-1] != 3 or view.dtype != torch.uint8:
        raise ValueError(f"fn.experimental.inputs.video gave {tuple(view.shape)} {view.dtype}, "
                         "expected (frames, height, width, 3) uint8")
    return view.clone()


def video_node(device: str = "mixed", sequence: int = SEQUENCE):
    """The pipeline's one operator (argument names as DALI 2.4's schema has them; checked by
    tests/curator/test_decoders_dali_schema.py wherever DALI is installed)."""
    from nvidia.dali import fn

    return fn.experimental.inputs.video(name="video", sequence_length=sequence, device=device,
                                        last_sequence_policy="partial", blocking=False)


#: DALI executors a pipeline is built with, in the order tried: the simple one (``exec_async`` and
#: ``exec_pipelined`` off; its outputs are reused after the next run, hence our copy) and DALI 2.x's
#: default dynamic one. Both read video after video correctly on DALI 2.4's CPU variant.
EXECUTORS = {"simple": {"exec_async": False, "exec_pipelined": False}, "dynamic": {"exec_dynamic": True}}


def build_pipeline(device_id: int | None, device: str = "mixed", sequence: int = SEQUENCE, *,
                   executor: str = "simple"):
    """One sequence per run, never scheduled ahead of the input (running past the video's end is an
    error): prefetch depth 1. ``device_id`` None only for ``device="cpu"``."""
    from nvidia.dali import pipeline_def

    if executor not in EXECUTORS:
        raise ValueError(f"unknown DALI executor {executor!r}; accepted: {', '.join(EXECUTORS)}")
    pipe = pipeline_def(lambda: video_node(device, sequence), batch_size=1, num_threads=2, device_id=device_id,
                        prefetch_queue_depth=1, **EXECUTORS[executor])()
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
