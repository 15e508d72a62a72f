"""``stitch``: merge adjacent clips whose boundary frames look alike (a cut that was not a real cut)."""

from __future__ import annotations

import numpy as np

from vfm_curator.io.video import frames_at
from vfm_curator.stages.base import Resources, Stage
from vfm_curator.stages.split import make_clip, pause_before
from vfm_curator.tasks import Clip, VideoTask


class StitchStage(Stage):
    """Embeds the last frame of each clip and the first frame of the next one (with the registered
    ``embedder``) and merges the two when they touch (``a.end == b.start``), their cosine similarity
    is at least ``threshold`` and the merged clip stays within ``max_clip_s``. The boundary frames
    are decoded again (small, one pass that stops at the last boundary) rather than kept by decode.

    ``device``: ``cpu`` (default) embeds pair by pair in numpy; ``cuda`` (or ``auto`` with a visible
    CUDA device) embeds every boundary frame of the video in one batch on the GPU with the
    embedder's torch path (``embed_torch``, the histogram embedder has one) and takes the cosines
    there, asking Ray for ``gpu_share`` of a GPU per worker."""

    name = "stitch"
    resources = Resources(cpus=0.5, memory_mb=512)
    defaults = {"embedder": "histogram", "embedder_options": {}, "threshold": 0.9, "max_clip_s": 20.0,
                "device": "cpu", "gpu_share": 0.125}

    def check_options(self) -> None:
        from vfm_curator.embedders.clip import check_device

        self.option_range("threshold", lo=-1, hi=1)
        self.option_range("max_clip_s", lo=0, lo_open=True)
        self.option_range("gpu_share", lo=0, hi=1, lo_open=True)
        check_device(self.opt["device"], who="stage 'stitch'")

    @property
    def configured_resources(self) -> Resources | None:
        """A GPU share when the boundary similarities run on CUDA."""
        from vfm_curator.embedders.clip import uses_cuda

        if not uses_cuda(self.opt["device"]):
            return None
        return self.gpu_share_resources()

    def setup(self) -> None:
        from vfm_curator.embedders import get_embedder
        from vfm_curator.embedders.clip import resolve_device

        self.embedder = get_embedder(self.opt["embedder"], **dict(self.opt["embedder_options"]))
        self.device = resolve_device(self.opt["device"], who="stage 'stitch'")
        self.use_torch = self.device != "cpu"  # the numpy path on the CPU, as before
        if self.use_torch and not hasattr(self.embedder, "embed_torch"):
            raise ValueError(f"stage 'stitch': device = {self.opt['device']!r} needs an embedder with a torch path "
                             f"(embed_torch); {self.opt['embedder']!r} has none: use device = 'cpu'")

    def process_one(self, task: VideoTask) -> None:
        if len(task.clips) < 2:
            return
        max_len = round(float(self.opt["max_clip_s"]) * float(task.meta["fps"]))
        frames = self._boundary_frames(task, max_len)
        on_device = self._device_similarities(frames) if self.use_torch else None
        similarities = []
        merged = [task.clips[0]]
        for clip in task.clips[1:]:
            prev = merged[-1]
            if _mergeable(task, prev, clip, max_len):
                if prev.end - 1 not in frames or clip.start not in frames:
                    merged.append(clip)  # the file ended before this boundary: nothing to compare
                    continue
                if on_device is not None:
                    sim = on_device[clip.start]
                else:
                    a, b = self.embedder.embed(np.stack([frames[prev.end - 1], frames[clip.start]]))
                    sim = float(np.dot(a, b))
                similarities.append(sim)
                if sim >= float(self.opt["threshold"]):
                    merged[-1] = make_clip(task, prev.start, clip.end)
                    continue
            merged.append(clip)
        task.meta["stitched"] = len(task.clips) - len(merged)
        task.clips = merged

    def _device_similarities(self, frames: dict[int, np.ndarray]) -> dict[int, float]:
        """boundary frame ``b`` -> cosine of frames ``b - 1`` and ``b``, for every such pair held,
        from one batched embedding on the device (a merged clip ends where its last part ended, so
        the pairs compared are always these)."""
        import torch

        pairs = [b for b in sorted(frames) if b - 1 in frames]
        if not pairs:
            return {}
        order = sorted({i for b in pairs for i in (b - 1, b)})
        row = {i: k for k, i in enumerate(order)}
        by_shape: dict[tuple, list[int]] = {}
        for i in order:
            by_shape.setdefault(frames[i].shape, []).append(i)
        dim = int(self.embedder.dim)
        vectors = torch.zeros((len(order), dim), dtype=torch.float32, device=self.device)
        with torch.inference_mode():
            for idx in by_shape.values():
                batch = torch.from_numpy(np.stack([frames[i] for i in idx])).to(self.device, non_blocking=True)
                vectors[[row[i] for i in idx]] = self.embedder.embed_torch(batch).to(torch.float32)
            a = vectors[[row[b - 1] for b in pairs]]
            b = vectors[[row[b] for b in pairs]]
            sims = (a * b).sum(dim=-1).cpu().numpy()
        return {boundary: float(s) for boundary, s in zip(pairs, sims)}

    @staticmethod
    def _boundary_frames(task: VideoTask, max_len: int) -> dict[int, np.ndarray]:
        """The two frames on each side of every boundary the merge loop may compare, decoded again
        at the decode stage's small size (one pass, only those frames kept: the decode stage keeps
        no frames, so memory does not grow with the video's length)."""
        clips = task.clips
        wanted: set[int] = set()
        for prev, clip in zip(clips[:-1], clips[1:]):
            # a merged clip only starts earlier than ``prev``, so this length test is necessary
            if _mergeable(task, prev, clip, max_len):
                wanted |= {prev.end - 1, clip.start}
        width, height = task.small_size or (None, None)
        return frames_at(task.source, sorted(wanted), width=width, height=height)


def _mergeable(task: VideoTask, prev: Clip, clip: Clip, max_len: int) -> bool:
    """``prev`` and ``clip`` touch, with no pause in the recording between them, and together stay
    within ``max_len`` frames."""
    return prev.end == clip.start and not pause_before(task, clip.start) and clip.end - prev.start <= max_len
