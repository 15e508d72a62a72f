"""``decode``: probe a video and score every frame at a small size, as a stream (no frame is kept)."""

from __future__ import annotations

from array import array

import numpy as np

from vfm_curator.io.video import iter_frames, probe, small_size
from vfm_curator.stages.base import LimitError, Resources, Stage
from vfm_curator.shot_detectors.content import FrameScorer
from vfm_curator.tasks import VideoTask


class DecodeStage(Stage):
    """Fills ``task.meta`` (fps, frames, width, height, duration, rotation) and, from one decoding
    pass at ``width`` pixels wide (upright), the per-frame ``task.times`` (seconds),
    ``task.cut_scores`` (shot detection) and ``task.motion`` (frame difference). Frames are scored
    as they are decoded and dropped, so memory stays flat whatever the video's length.
    ``hwaccel="cuda"`` decodes with NVDEC through PyAV when an NVIDIA GPU is present (falls back to
    software otherwise)."""

    name = "decode"
    resources = Resources(cpus=1.0, memory_mb=1024)
    defaults = {"width": 64, "hwaccel": None, "min_frames": 2}

    def check_options(self) -> None:
        self.option_range("width", lo=2, hi=4096, integer=True)
        self.option_range("min_frames", lo=1, integer=True)

    def process_one(self, task: VideoTask) -> None:
        info = probe(task.source)
        w, h = small_size(info.width, info.height, int(self.opt["width"]))
        times = array("d")
        scorer = FrameScorer()
        for t, frame in iter_frames(task.source, width=w, height=h, hwaccel=self.opt["hwaccel"]):
            times.append(t)
            scorer.push(frame)
        if len(times) < int(self.opt["min_frames"]):
            raise LimitError(f"too short: {len(times)} decodable frame(s), under min_frames={self.opt['min_frames']}",
                             kind="too-short")
        task.times = np.frombuffer(times, np.float64).copy()
        task.cut_scores, task.motion = scorer.content, scorer.motion
        task.small_size = (w, h)
        times = task.times
        fps = info.fps
        if len(times) > 1 and (fps <= 0 or not np.isfinite(fps)):
            fps = (len(times) - 1) / max(times[-1] - times[0], 1e-6)
        frame_s = 1.0 / fps if fps > 0 else 0.0
        task.meta = {
            "fps": fps,
            "frames": len(times),
            "width": info.width,
            "height": info.height,
            "duration": float(times[-1] - times[0] + frame_s),
            "rotation": info.rotation,
            "codec": info.codec,
            # variable frame rate: frame intervals that differ from each other by more than 10 %
            "vfr": bool(len(times) > 2 and np.ptp(np.diff(times)) > 0.1 * np.median(np.diff(times))),
        }
