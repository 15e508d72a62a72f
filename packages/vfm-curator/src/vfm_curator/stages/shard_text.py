"""``shard_text``: encode the captions of a batch of clips with a registered vfm-models text encoder
in one call, keeping each caption's real tokens only (the shard stores (L_i, D), no padding)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from vfm_curator.stages.base import Resources, Stage, run_guarded
from vfm_curator.stages.shard_task import ShardTask


def build_text_encoder(name: str, options: dict[str, Any] | None = None, seed: int = 0):
    """The registered text encoder ``name`` (seeded like the tokenizer, for random-init encoders)."""
    import torch

    import vfm_models

    factory = vfm_models.get_text_encoder(name)
    torch.manual_seed(seed)
    encoder = factory(**(options or {}))
    if hasattr(encoder, "eval"):
        encoder.eval()
    return encoder


def encode_captions(encoder, captions: list[str]) -> list[np.ndarray]:
    """One (L_i, D) float32 array of real tokens per caption. Encoders return ``(text (B, L, D),
    mask (B, L))`` (vfm-models' convention); a bare tensor means every token is real."""
    import torch

    with torch.inference_mode():
        out = encoder.encode(captions)
    text, mask = out if isinstance(out, tuple) else (out, None)
    if mask is None:
        mask = torch.ones(text.shape[:2], dtype=torch.bool)
    rows = []
    for emb, real in zip(text.float().cpu(), mask.bool().cpu()):
        n = max(1, int(real.sum()))  # a shard sample needs >= 1 row; real tokens come first
        rows.append(emb[:n].numpy().copy())
    return rows


class ShardTextStage(Stage):
    """Sets ``task.text`` ((L, D) float32) for up to ``batch_size`` clips per call. A missing caption
    is encoded as the empty string (the pipeline fails such clips earlier when captions are required)."""

    name = "shard_text"
    resources = Resources(cpus=1.0, memory_mb=1024)
    batch_size = 16
    defaults = {"text_encoder": "hash", "text_encoder_options": {}, "seed": 0, "device": "cpu"}

    def setup(self) -> None:
        self.encoder = build_text_encoder(self.opt["text_encoder"], self.opt["text_encoder_options"], self.opt["seed"])
        if hasattr(self.encoder, "to"):
            self.encoder = self.encoder.to(self.opt["device"])

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
        share = (time.perf_counter() - t0) / len(todo)
        for task, text in zip(todo, texts):
            task.text = text
            task.timings[self.name] = task.timings.get(self.name, 0.0) + share
        return tasks

    def _one(self, task: ShardTask) -> None:
        task.text = encode_captions(self.encoder, [task.caption or ""])[0]
