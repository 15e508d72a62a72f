"""``stitch``: merge adjacent clips whose boundary frames look alike (a cut that was not a real cut)."""

from __future__ import annotations

import numpy as np

from vfm_curator.io.video import frames_at
from vfm_curator.stages.base import Resources, Stage
from vfm_curator.stages.split import make_clip
from vfm_curator.tasks import VideoTask


class StitchStage(Stage):
    """Embeds the last frame of each clip and the first frame of the next one (with the registered
    ``embedder``) and merges the two when they touch (``a.end == b.start``), their cosine similarity
    is at least ``threshold`` and the merged clip stays within ``max_clip_s``. The boundary frames
    are decoded again (small, one pass that stops at the last boundary) rather than kept by decode."""

    name = "stitch"
    resources = Resources(cpus=0.5, memory_mb=512)
    defaults = {"embedder": "histogram", "embedder_options": {}, "threshold": 0.9, "max_clip_s": 20.0}

    def check_options(self) -> None:
        self.option_range("threshold", lo=-1, hi=1)
        self.option_range("max_clip_s", lo=0, lo_open=True)

    def setup(self) -> None:
        from vfm_curator.embedders import get_embedder

        self.embedder = get_embedder(self.opt["embedder"], **dict(self.opt["embedder_options"]))

    def process_one(self, task: VideoTask) -> None:
        if len(task.clips) < 2:
            return
        max_len = round(float(self.opt["max_clip_s"]) * float(task.meta["fps"]))
        frames = self._boundary_frames(task, max_len)
        similarities = []
        merged = [task.clips[0]]
        for clip in task.clips[1:]:
            prev = merged[-1]
            if prev.end == clip.start and clip.end - prev.start <= max_len:
                if prev.end - 1 not in frames or clip.start not in frames:
                    merged.append(clip)  # the file ended before this boundary: nothing to compare
                    continue
                a, b = self.embedder.embed(np.stack([frames[prev.end - 1], frames[clip.start]]))
                sim = float(np.dot(a, b))
                similarities.append(sim)
                if sim >= float(self.opt["threshold"]):
                    merged[-1] = make_clip(task, prev.start, clip.end)
                    continue
            merged.append(clip)
        task.meta["stitched"] = len(task.clips) - len(merged)
        task.clips = merged

    @staticmethod
    def _boundary_frames(task: VideoTask, max_len: int) -> dict[int, np.ndarray]:
        """The two frames on each side of every boundary the merge loop may compare, decoded again
        at the decode stage's small size (one pass, only those frames kept: the decode stage keeps
        no frames, so memory does not grow with the video's length)."""
        clips = task.clips
        wanted: set[int] = set()
        for prev, clip in zip(clips[:-1], clips[1:]):
            # a merged clip only starts earlier than ``prev``, so this length test is necessary
            if prev.end == clip.start and clip.end - prev.start <= max_len:
                wanted |= {prev.end - 1, clip.start}
        width, height = task.small_size or (None, None)
        return frames_at(task.source, sorted(wanted), width=width, height=height)
