"""``decode``: probe a video and score every frame at a small size, as a stream (no frame is kept)."""

from __future__ import annotations

import logging
import warnings
from array import array

import numpy as np
from vfm_plugins import Notice

from vfm_curator.io.video import MAX_PIXELS, probe, small_size
from vfm_curator.stages.base import InputError, LimitError, Resources, Stage
from vfm_curator.shot_detectors.content import FrameScorer
from vfm_curator.shot_detectors.spans import pause_seconds, pauses
from vfm_curator.tasks import VideoTask

log = logging.getLogger(__name__)

class DecodeStage(Stage):
    """Fills ``task.meta`` (fps, frames, width, height, duration, rotation, decoder) and, from one
    decoding pass at ``width`` pixels wide (upright), the per-frame ``task.times`` (seconds),
    ``task.cut_scores`` (shot detection) and ``task.motion`` (frame difference). Frames are scored
    as they are decoded (a batch of up to 32 small frames at a time: :class:`FrameScorer`) and
    dropped, so memory stays flat whatever the video's length.

    ``decoder`` names a decoder backend (:mod:`vfm_curator.decoders`: ``pyav``, ``pyav-cuda``,
    ``nvdec``, ``dali`` or a plugin's) or ``auto``: the fastest available one, measured on the first
    video of each worker (``pyav`` wherever there is no GPU). Frames a GPU backend leaves on the GPU
    are scored there when the torch scorer is installed; such a worker asks Ray for ``gpu_share`` of
    a GPU (default a quarter: several decode workers share a card, whose NVDEC has several engines).
    ``hwaccel`` is the old spelling of PyAV's hwaccel (deprecated: ``decoder = "pyav-cuda"``); it
    still decodes with PyAV, FFmpeg's software fallback allowed.

    ``max_pixels`` refuses a video whose declared frame size is larger (failure kind ``too-large``,
    cause ``config``) before any frame is decoded; the default, 8192x8192, is 1.9x the largest
    frame an H.264/HEVC level allows (8K UHD and DCI 8K pass).
    """

    name = "decode"
    resources = Resources(cpus=1.0, memory_mb=1024)
    defaults = {"width": 64, "decoder": "auto", "hwaccel": None, "min_frames": 2, "gpu_share": 0.25,
                "max_pixels": MAX_PIXELS}

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self._decoder = None  # made on the worker's first video (auto measures there)

    def check_options(self) -> None:
        from vfm_curator.decoders import check_name

        self.option_range("width", lo=2, hi=4096, integer=True)
        self.option_range("min_frames", lo=1, integer=True)
        self.option_range("gpu_share", lo=0, hi=1, lo_open=True)
        self.option_range("max_pixels", lo=1, integer=True)
        try:
            check_name(self.opt["decoder"])
        except ValueError as exc:
            raise ValueError(f"stage 'decode': {exc}") from None
        hwaccel = self.opt["hwaccel"]
        if hwaccel is not None:
            if not isinstance(hwaccel, str) or not hwaccel:
                raise ValueError(f"stage 'decode': option hwaccel must be a device type such as 'cuda', got {hwaccel!r}")
            if self.opt["decoder"] not in ("auto", "pyav"):
                raise ValueError(f"stage 'decode': hwaccel={hwaccel!r} is PyAV's option and cannot be combined with "
                                 f"decoder={self.opt['decoder']!r}; use decoder = 'pyav-cuda' instead of hwaccel")
            # a Notice, said when the options are checked (in the driver, before any work): a
            # DeprecationWarning raised here or in a worker is hidden by Python's default filters
            warnings.warn("stage 'decode': option hwaccel is deprecated; use decoder = 'pyav-cuda' (NVDEC "
                          "through PyAV) or decoder = 'auto'", Notice, stacklevel=2)

    @property
    def configured_resources(self) -> Resources | None:
        """A GPU share when the frames are decoded on a GPU: a GPU backend named, or ``auto`` where one
        is available (checked in the driver; ``None`` everywhere else, the class's CPU resources)."""
        from vfm_curator.decoders import availability, decoder_class

        name = self.opt["decoder"]
        if self.opt["hwaccel"] is not None:
            return None
        if name == "auto":
            on_gpu = any(ok and decoder_class(n).uses_gpu for n, (ok, _) in availability().items())
        else:
            on_gpu = decoder_class(name).uses_gpu
        if not on_gpu:
            return None
        return self.gpu_share_resources(memory_mb=2048)

    def setup(self) -> None:
        """A backend named in the config must be available on this worker: else the stage cannot be
        set up (a config error naming why), instead of every video failing the same way."""
        if self._decoder is None and self.opt["decoder"] != "auto" and self.opt["hwaccel"] is None:
            from vfm_curator import decoders

            self._decoder = decoders.create(self.opt["decoder"])
            log.info("decode: decoder %s on %s (configured)", self._decoder.name, self._decoder.device)

    def decoder_for(self, path: str, size: tuple[int, int]):
        """This worker's decoder, made on its first video (``auto`` measures there, once)."""
        if self._decoder is None:
            from vfm_curator import decoders

            if self.opt["hwaccel"] is not None:
                from vfm_curator.decoders.pyav import PyAVDecoder

                self._decoder = PyAVDecoder()
                self._decoder.hwaccel = self.opt["hwaccel"]  # io.video's hwaccel: software fallback allowed
                why = f"hwaccel={self.opt['hwaccel']!r}, software fallback allowed"
            elif self.opt["decoder"] == "auto":
                choice = decoders.choose(path, size=size)
                self._decoder = decoders.create(choice.name)
                why = f"auto: {choice.reason}"
            else:  # setup() made it; a caller that skipped setup gets it here
                self._decoder = decoders.create(self.opt["decoder"])
                why = "configured"
            log.info("decode: decoder %s on %s (%s)", self._decoder.name, self._decoder.device, why)
        return self._decoder

    def process_one(self, task: VideoTask) -> None:
        info = probe(task.source, max_pixels=int(self.opt["max_pixels"]))
        if min(info.width, info.height) < 2:
            raise InputError(f"frame size {info.width}x{info.height} is too small to make clips of; accepted: at least "
                             "2x2 pixels (H264 4:2:0 codes pixels in pairs)")
        w, h = small_size(info.width, info.height, int(self.opt["width"]))
        decoder = self.decoder_for(task.source, (w, h))
        try:
            times, scorer = _score(decoder, task.source, (w, h))
        except InputError as exc:
            if decoder.name == "pyav":
                raise
            # a stream this backend cannot decode at all (NVDEC has no H264 4:4:4): PyAV decodes it
            from vfm_curator.decoders.pyav import PyAVDecoder

            log.warning("decode: %s cannot decode %s (%s); decoding it with pyav", decoder.name, task.source, exc)
            decoder = PyAVDecoder()
            times, scorer = _score(decoder, task.source, (w, h))
        if len(times) == 1 and info.codec in IMAGE_CODECS:
            raise InputError(f"a still image ({info.codec}, one frame), not a video")
        if len(times) < int(self.opt["min_frames"]):
            # a 1-frame video is kept as a 1-frame clip (an image sample for vfm shard) only when asked for
            raise LimitError(f"too short: {len(times)} decodable frame(s), under decode.min_frames={self.opt['min_frames']}"
                             " (to keep 1-frame videos as 1-frame clips: decode.min_frames = 1 and split.min_clip_s = 0)",
                             kind="too-short")
        raw = np.frombuffer(times, np.float64)
        fps = frame_rate(info.fps, raw)
        if fps != info.fps and info.fps > 0:
            log.info("decode: %s declares %.3f frames a second but its frames come %.3f a second; clips use %.3f",
                     task.source, info.fps, fps, fps)
        task.times, repaired = relative_times(raw, fps)
        task.cut_scores, task.motion = _on_host(scorer.content), _on_host(scorer.motion)
        task.small_size = (w, h)
        times = task.times
        if repaired:
            log.info("decode: %s has %d frame time(s) that go back or repeat (spliced or damaged timestamps); "
                     "their times are repaired (see relative_times)", task.source, repaired)
        frame_s = 1.0 / fps if fps > 0 else 0.0
        task.meta = {
            "fps": fps,
            "frames": len(times),
            "width": info.width,
            "height": info.height,
            "duration": float(times[-1] - times[0] + frame_s),
            "rotation": info.rotation,
            "codec": info.codec,
            "stream": info.stream,  # which of the file's streams (a file may hold several videos and pictures)
            "video_streams": info.video_streams,
            # variable frame rate: frame intervals that differ from each other by more than 10 %
            "vfr": bool(len(times) > 2 and np.ptp(np.diff(times)) > 0.1 * np.median(np.diff(times))),
            "decoder": decoder.name,
            "start_time": float(raw[0]),  # the first frame's time in the source's clock (times count from it)
            "pause_s": pause_seconds(times),  # a longer step between frames is a pause: no clip spans it
        }
        if repaired:
            task.meta["times_repaired"] = repaired
        short = decoded_short(info.duration, task.meta["duration"])
        if short is not None:
            task.meta["decoded_short"] = short
            log.info("decode: %s decodes %.2f s of the %.2f s it declares (truncated or damaged); its clips end there",
                        task.source, short["decoded_s"], short["declared_s"])


#: codecs of still pictures: a single frame of one is an image saved under a video name, not a video
IMAGE_CODECS = frozenset({"mjpeg", "jpeg2000", "jpegls", "jpegxl", "png", "apng", "gif", "webp", "bmp", "tiff",
                          "pgm", "ppm", "pam", "pbm", "qoi", "targa", "sgi", "dpx", "exr", "hdr", "psd"})


def frame_rate(declared: float, raw: np.ndarray) -> float:
    """The frame rate clips are encoded at: the container's (``declared``), unless it is missing or
    more than 1.5x off the rate the frames' times give (one over their mean forward step, pauses left
    out: a header that says 60000 or 1000 frames a second, a time base taken for a rate), then the
    measured one. Within 1.5x the container's stands (a variable frame rate's average)."""
    declared = float(declared) if declared and np.isfinite(declared) else 0.0
    raw = np.asarray(raw, np.float64)
    steps = np.diff(raw)[~pauses(raw)]  # a pause in the recording says nothing about the rate
    steps = steps[steps > 0]  # a clock that restarts or repeats says nothing about it either
    measured = len(steps) / float(np.sum(steps)) if len(steps) else 0.0
    if declared <= 0:
        return measured
    if measured > 0 and len(steps) >= 2 and not 1 / 1.5 <= declared / measured <= 1.5:
        return measured
    return declared


def relative_times(raw: np.ndarray, fps: float) -> tuple[np.ndarray, int]:
    """Frame times counted from the first frame (a .ts/.mpg clock starts anywhere: 0.54 s, 1.4 s,
    hours), increasing. A time that goes back or repeats is repaired: when the times after it go on
    from before it (a repeated or damaged timestamp), that frame alone moves between its neighbours;
    when they go on from it (files spliced together, a clock reset), every later frame moves by the
    same amount, to one frame (``1/fps``) after the last good one, keeping their spacing. Returns the
    times and how many frames were repaired."""
    times = np.asarray(raw, np.float64) - float(raw[0])
    if len(times) < 2 or bool(np.all(np.diff(times) > 0)):
        return times, 0
    step = 1.0 / fps if fps > 0 and np.isfinite(fps) else 1.0 / 25
    out, offset, moved = times.copy(), 0.0, 0
    for i in range(1, len(times)):
        cur = times[i] + offset
        if cur > out[i - 1]:
            out[i] = cur
            continue
        moved += 1
        after = times[i + 1] + offset if i + 1 < len(times) else None
        if after is not None and after > out[i - 1]:  # the clock goes on: only this frame was off
            out[i] = out[i - 1] + min(step, (after - out[i - 1]) / 2)
        else:  # the clock restarted: later frames keep their spacing from here
            offset += out[i - 1] + step - cur
            out[i] = out[i - 1] + step
    return out, moved


def decoded_short(declared_s: float, decoded_s: float) -> dict[str, float] | None:
    """``{declared_s, decoded_s}`` when decoding ended well before the length the container declares
    (by more than 0.5 s and 5 %): a truncated download or a damaged file, whose frames up to there
    are kept. None otherwise (no declared length, or within the tolerance of timestamp rounding)."""
    declared_s = float(declared_s or 0.0)
    if declared_s <= 0 or decoded_s >= declared_s - max(0.5, 0.05 * declared_s):
        return None
    return {"declared_s": round(declared_s, 3), "decoded_s": round(float(decoded_s), 3)}


def _score(decoder, path: str, size: tuple[int, int]) -> tuple[array, object]:
    """One decoding pass: every frame's time and its scores (the frame itself is dropped)."""
    times = array("d")
    scorer, on_host = FrameScorer(), True
    for i, (t, frame) in enumerate(decoder.frames(path, size)):
        if i == 0:
            scorer, on_host = _scorer_for(frame)
        times.append(t)
        scorer.push(frame if not on_host or isinstance(frame, np.ndarray) else frame.cpu().numpy())
    return times, scorer


def _on_host(scores) -> np.ndarray:
    """Scores as a float32 numpy array, wherever the scorer kept them."""
    if hasattr(scores, "detach"):
        scores = scores.detach().cpu().numpy()
    return np.asarray(scores, np.float32)


def _scorer_for(frame):
    """``(scorer, frames go to the host first)``: numpy frames get the CPU scorer; GPU frames get
    the torch scorer on their device when it is installed, else they are copied to the host."""
    if isinstance(frame, np.ndarray):
        return FrameScorer(), True
    try:
        from vfm_curator.shot_detectors.torch_scorer import TorchFrameScorer
    except ImportError:
        return FrameScorer(), True
    return TorchFrameScorer(), False
