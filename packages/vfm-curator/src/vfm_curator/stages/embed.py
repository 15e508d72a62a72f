"""``embed``: one embedding per clip from its sampled frames, with a registered embedder."""

from __future__ import annotations

import inspect
import time
from typing import Any

import numpy as np

from vfm_curator.embedders import get_embedder, normalize
from vfm_curator.stages.base import Resources, Stage, run_guarded
from vfm_curator.tasks import VideoTask


class EmbedStage(Stage):
    """``clip.embedding`` = the normalised mean of the embeddings of the clip's sampled frames.
    ``embedder`` names an entry of the ``embedders`` kind (``histogram`` needs no weights; ``clip``
    takes ``embedder_options={"model_path": ...}`` and ``device``/``dtype``, see
    :mod:`vfm_curator.embedders.clip`).

    An embedder that runs on CUDA (its ``device`` option, or its default, resolves to CUDA) makes a
    worker ask Ray for ``gpu_share`` of a GPU, and gets the sampled frames of every clip of the
    call's videos in one ``embed`` call (the embedder batches them); on the CPU each clip is
    embedded alone, as before."""

    name = "embed"
    resources = Resources(cpus=1.0, memory_mb=2048)
    batch_size = 4
    defaults = {"embedder": "histogram", "embedder_options": {}, "gpu_share": 0.25}

    def check_options(self) -> None:
        self.option_range("gpu_share", lo=0, hi=1, lo_open=True)
        if not isinstance(self.opt["embedder_options"], dict):
            raise ValueError(f"stage 'embed': embedder_options must be a table of options, got {self.opt['embedder_options']!r}")
        device = option_device("embedders", self.opt["embedder"], self.opt["embedder_options"])
        if device is not None:
            from vfm_curator.embedders.clip import check_device

            check_device(device, self.opt["embedder_options"].get("dtype", "auto"), who="stage 'embed'")

    @property
    def configured_resources(self) -> Resources | None:
        """A GPU share when the embedder will run on CUDA; the class's resources otherwise."""
        return gpu_resources(self, "embedders", self.opt["embedder"], self.opt["embedder_options"])

    def setup(self) -> None:
        self.embedder = get_embedder(self.opt["embedder"], **dict(self.opt["embedder_options"]))

    def process(self, tasks: list[Any]) -> list[Any]:
        self.ensure_setup()
        if not str(getattr(self.embedder, "device", "cpu")).startswith("cuda"):
            return super().process(tasks)
        live = [t for t in tasks if getattr(t, "failure", None) is None]
        gathered: dict[int, list] = {}  # id(task) -> [(clip, number of frames)]
        frames: list[np.ndarray] = []

        def gather(task: VideoTask) -> None:
            rows = []
            for clip in task.clips:
                samples = clip.samples
                if samples:
                    same = _same_size(samples)
                    rows.append((clip, len(same)))
                    frames.extend(same)
            gathered[id(task)] = rows

        for task in live:
            run_guarded(self.name, task, gather)
        live = [t for t in live if t.failure is None]
        if not frames:
            return tasks
        # one embed call for all clips of these videos; frames of other sizes go in their own call
        t0 = time.perf_counter()
        try:
            vectors = _embed_by_size(self.embedder, frames)
            error = None
        except Exception as exc:  # noqa: BLE001 - every video of the call fails with it
            vectors, error = None, exc
        share = (time.perf_counter() - t0) / max(1, len(live))
        at = 0
        for task in live:
            def assign(task: VideoTask, at: int = at) -> None:
                if error is not None:
                    raise error
                for clip, n in gathered[id(task)]:
                    clip.embedding = normalize(vectors[at : at + n].mean(axis=0))
                    at += n

            run_guarded(self.name, task, assign)
            at += sum(n for _, n in gathered[id(task)])
            if getattr(task, "timings", None) is not None:
                task.timings[self.name] = task.timings.get(self.name, 0.0) + share
        return tasks

    def process_one(self, task: VideoTask) -> None:
        for clip in task.clips:
            samples = clip.samples  # one read: a staged clip's samples come from its file
            if samples:
                clip.embedding = normalize(self.embedder.embed(np.stack(_same_size(samples))).mean(axis=0))


def _same_size(frames: list[np.ndarray]) -> list[np.ndarray]:
    h, w = frames[0].shape[:2]
    return [f for f in frames if f.shape[:2] == (h, w)]


def _embed_by_size(embedder, frames: list[np.ndarray]) -> np.ndarray:
    """(N, D) embeddings of ``frames`` in order, one ``embed`` call per distinct frame size."""
    out: np.ndarray | None = None
    by_size: dict[tuple, list[int]] = {}
    for i, f in enumerate(frames):
        by_size.setdefault(f.shape, []).append(i)
    for rows in by_size.values():
        vectors = np.asarray(embedder.embed(np.stack([frames[i] for i in rows])))
        if out is None:
            out = np.zeros((len(frames), vectors.shape[1]), np.float32)
        out[rows] = vectors
    return out


def option_device(kind: str, name: str | None, options: dict) -> str | None:
    """The ``device`` a registered embedder/captioner will be built with: its option, else its
    constructor's default; None when it takes no ``device`` (it runs on the CPU)."""
    if not name:
        return None
    if "device" in options:
        return options["device"]
    from vfm_curator.plugins import host

    try:
        cls = host.get(kind, name)
        param = inspect.signature(cls).parameters.get("device")
    except (KeyError, TypeError, ValueError):
        return None
    if param is None or param.default is inspect.Parameter.empty:
        return None
    return param.default


def gpu_resources(stage: Stage, kind: str, name: str | None, options: dict) -> Resources | None:
    """``stage``'s resources with ``gpus = gpu_share`` when the named embedder/captioner will run on
    CUDA here (``device`` ``auto`` with a visible CUDA device, or ``cuda``); None otherwise."""
    from vfm_curator.embedders.clip import uses_cuda

    device = option_device(kind, name, options)
    if device is None or not uses_cuda(device):
        return None
    return stage.gpu_share_resources()
