"""``shard_tokenize``: encode the frames of a batch of clips with a registered vfm-models tokenizer,
one forward pass per bucket (all clips of a bucket have the same shape)."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import numpy as np

from vfm_curator.stages.base import Resources, Stage, run_guarded
from vfm_curator.stages.shard_task import ShardTask, credit_time


def to_pixels(frames: np.ndarray):
    """(N, T, H, W, 3) uint8 -> (N, 3, T, H, W) float32 in [-1, 1], the tokenizers' input."""
    import torch

    x = torch.from_numpy(np.ascontiguousarray(frames)).float()
    return (x / 127.5 - 1.0).permute(0, 4, 1, 2, 3).contiguous()


def to_frames(pixels) -> np.ndarray:
    """Inverse of :func:`to_pixels`: (N, 3, T, H, W) in [-1, 1] -> (N, T, H, W, 3) uint8 (rounded)."""
    import torch

    x = ((pixels.float().clamp(-1, 1) + 1.0) * 127.5).round().to(torch.uint8)
    return x.permute(0, 2, 3, 4, 1).contiguous().numpy()


def build_registered(kind: str, name: str, options: dict[str, Any] | None = None, device: str = "cpu"):
    """The vfm-models ``kind`` ("tokenizers", "text_encoders") registered as ``name``, built with
    ``options`` under :data:`vfm_models.seeded.SEED`: a randomly initialised model (no weights) is then
    the same in every worker process, and the one ``vfm train`` and ``vfm generate`` build to embed
    the empty caption and to decode (the caller's random state is left as it was)."""
    import vfm_models
    from vfm_models.seeded import build_seeded

    vfm_models.host.get(kind, name)  # an unknown name lists the registered ones
    model = build_seeded(lambda **o: vfm_models.host.build(kind, name, o), options)  # an unknown option is named
    if hasattr(model, "eval"):
        model = model.eval().to(device)
    return model


class ModelOnDeviceStage(Stage):
    """A stage whose model runs on its ``device`` option: on CUDA (``cuda`` or ``cuda:N``) a worker
    asks Ray for ``gpu_share`` of a GPU, since Ray gives a worker that declares none no CUDA device
    at all; on the CPU it keeps the class's resources."""

    def check_options(self) -> None:
        self.option_range("gpu_share", lo=0, hi=1, lo_open=True)
        from vfm_models.seeded import SEED

        if self.opt["seed"] != SEED:  # kept as an option so configs that name it still load
            raise ValueError(f"stage {self.name!r}: option seed = {self.opt['seed']!r} is not accepted; a model without "
                             f"weights is built under seed {SEED}, as vfm train and vfm generate build it to embed and "
                             f"decode (another seed would shard with another network): leave seed out")

    @property
    def configured_resources(self) -> Resources | None:
        if not str(self.opt["device"]).startswith("cuda"):
            return None
        return self.gpu_share_resources()


def build_tokenizer(name: str, options: dict[str, Any] | None = None, device: str = "cpu"):
    return build_registered("tokenizers", name, options, device)


class ShardTokenizeStage(ModelOnDeviceStage):
    """Sets ``task.latent`` ((C, T', H', W') float32, or (N, C, T', H', W') for a clip of N windows) for
    up to ``batch_size`` clips per call, encoding at most ``batch_size`` windows per forward pass."""

    name = "shard_tokenize"
    resources = Resources(cpus=1.0, memory_mb=2048)
    batch_size = 4
    defaults = {"tokenizer": "pixel", "tokenizer_options": {}, "seed": 0, "device": "cpu", "gpu_share": 0.5}

    def setup(self) -> None:
        o = self.opt
        self.tokenizer = build_tokenizer(o["tokenizer"], o["tokenizer_options"], o["device"])

    def encode(self, frames: np.ndarray) -> np.ndarray:
        """(N, T, H, W, 3) uint8 -> (N, C, T', H', W') float32."""
        import torch
        from vfm_models.tokenizers.contract import checked_tensor

        with torch.inference_mode():
            latent = self.tokenizer.encode(to_pixels(frames).to(self.opt["device"]))
        latent = checked_tensor(latent, self.tokenizer, "encode")
        if latent.dim() != 5 or latent.shape[0] != len(frames):
            # the windows of several clips share a forward pass and are handed back by position: a
            # latent short of one would give a clip another clip's window, or none
            raise ValueError(f"tokenizer {self.opt['tokenizer']!r} returned latents of shape {tuple(latent.shape)} for "
                             f"{len(frames)} window(s) of shape {tuple(frames.shape[1:])}; a tokenizer must return "
                             f"(N, C, T', H', W') with N = {len(frames)}, one latent per window in order")
        return latent.float().cpu().numpy()

    def process(self, tasks: list[ShardTask]) -> list[ShardTask]:
        self.ensure_setup()
        groups: dict[str, list[ShardTask]] = defaultdict(list)
        for task in tasks:
            if task.failure is None:
                groups[task.bucket].append(task)
        for group in groups.values():
            t0 = time.perf_counter()
            try:
                windows = [t.windows() for t in group]
                latents = self._encode_windows(np.concatenate(windows))
            except Exception:  # one bad clip must not fail its batch: retry one by one for the reasons
                for task in group:
                    run_guarded(self.name, task, self._one)
                continue
            start = 0
            for task, own in zip(group, windows):
                self._set_latent(task, latents[start : start + len(own)])
                start += len(own)
            credit_time(group, self.name, time.perf_counter() - t0)
        return tasks

    def _encode_windows(self, windows: np.ndarray) -> np.ndarray:
        """(N, T, H, W, 3) -> (N, C, T', H', W'), ``batch_size`` windows per forward pass (a long clip
        gives many: its memory stays that of a batch)."""
        return np.concatenate([self.encode(windows[i : i + self.batch_size]) for i in range(0, len(windows), self.batch_size)])

    @staticmethod
    def _set_latent(task: ShardTask, latents: np.ndarray) -> None:
        task.latent = latents[0] if len(latents) == 1 else latents
        task.frames = None  # not needed downstream; keeps the object store small

    def _one(self, task: ShardTask) -> None:
        self._set_latent(task, self._encode_windows(task.windows()))
