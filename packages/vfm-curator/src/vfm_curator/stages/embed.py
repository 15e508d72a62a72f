"""``embed``: one embedding per clip from its sampled frames, with a registered embedder."""

from __future__ import annotations

import numpy as np

from vfm_curator.embedders import get_embedder, normalize
from vfm_curator.stages.base import Resources, Stage
from vfm_curator.tasks import VideoTask


class EmbedStage(Stage):
    """``clip.embedding`` = the normalised mean of the embeddings of the clip's sampled frames.
    ``embedder`` names an entry of the ``embedders`` kind (``histogram`` needs no weights; ``clip``
    takes ``embedder_options={"model_path": ...}``)."""

    name = "embed"
    resources = Resources(cpus=1.0, memory_mb=2048)
    batch_size = 4
    defaults = {"embedder": "histogram", "embedder_options": {}}

    def setup(self) -> None:
        self.embedder = get_embedder(self.opt["embedder"], **dict(self.opt["embedder_options"]))

    def process_one(self, task: VideoTask) -> None:
        for clip in task.clips:
            samples = clip.samples  # one read: a staged clip's samples come from its file
            if samples:
                clip.embedding = normalize(self.embedder.embed(np.stack(_same_size(samples))).mean(axis=0))


def _same_size(frames: list[np.ndarray]) -> list[np.ndarray]:
    h, w = frames[0].shape[:2]
    return [f for f in frames if f.shape[:2] == (h, w)]
