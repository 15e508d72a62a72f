"""``shard_text``: encode the captions of a batch of clips with a registered vfm-models text encoder
in one call, keeping each caption's real tokens only (the shard stores (L_i, D), no padding)."""

from __future__ import annotations

import time
import numpy as np

from vfm_curator.stages.base import Resources, run_guarded
from vfm_curator.stages.shard_task import ShardTask, credit_time
from vfm_curator.stages.shard_tokenize import ModelOnDeviceStage, build_registered


def encode_captions(encoder, captions: list[str]) -> list[np.ndarray]:
    """One (L_i, D) float32 array of real tokens per caption. Encoders return ``(text (B, L, D),
    mask (B, L))`` (vfm-models' convention); a bare tensor means every token is real."""
    import torch
    from vfm_models.conditioning import encode_text

    with torch.inference_mode():  # read as training and generation read it (what is refused is named there)
        text, mask = encode_text(encoder, captions)
    if text.dim() != 3 or text.shape[0] != len(captions) or tuple(mask.shape) != tuple(text.shape[:2]):
        # captions are handed back by position: one row short would give a clip another's caption
        raise ValueError(f"text encoder returned text of shape {tuple(text.shape)} (mask {tuple(mask.shape)}) for "
                         f"{len(captions)} caption(s); expected (B, L, D) and a (B, L) mask with B = {len(captions)}")
    rows = []
    for emb, real in zip(text.float().cpu(), mask.bool().cpu()):
        n = max(1, int(real.sum()))  # a shard sample needs >= 1 row; real tokens come first
        rows.append(emb[:n].numpy().copy())
    return rows


class ShardTextStage(ModelOnDeviceStage):
    """Sets ``task.text`` ((L, D) float32) for up to ``batch_size`` clips per call. A missing caption
    is encoded as the empty string (the pipeline fails such clips earlier when captions are required)."""

    name = "shard_text"
    resources = Resources(cpus=1.0, memory_mb=1024)
    batch_size = 16
    defaults = {"text_encoder": "hash", "text_encoder_options": {}, "seed": 0, "device": "cpu", "gpu_share": 0.5}

    def setup(self) -> None:
        o = self.opt
        self.encoder = build_registered("text_encoders", o["text_encoder"], o["text_encoder_options"], o["device"])

    def process(self, tasks: list[ShardTask]) -> list[ShardTask]:
        self.ensure_setup()
        todo = [t for t in tasks if t.failure is None]
        if not todo:
            return tasks
        t0 = time.perf_counter()
        try:
            texts = encode_captions(self.encoder, [t.caption or "" for t in todo])
        except Exception:  # find the caption that breaks the batch, keep the others
            for task in todo:
                run_guarded(self.name, task, self._one)
            return tasks
        for task, text in zip(todo, texts):
            task.text = text
        credit_time(todo, self.name, time.perf_counter() - t0)
        return tasks

    def _one(self, task: ShardTask) -> None:
        task.text = encode_captions(self.encoder, [task.caption or ""])[0]
