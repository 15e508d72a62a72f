"""A tiny real run (the ``dit`` family's tiny preset, EDM, synthetic blobs) shared by the trainer
and checkpoint tests; small enough that a step takes milliseconds on one CPU thread."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import vfm_models

from vfm_parallel.trainer.synthetic import SyntheticLoader, make_blobs
from vfm_parallel.trainer import TrainParts, from_dict

@pytest.fixture(autouse=True)
def one_thread():
    """Imported by a test module: each of its tests runs on one CPU thread (fast and repeatable)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


SHAPE = (3, 2, 4, 4)  # patch (1, 2, 2) -> 8 tokens per sample  # (C, T, H, W) of the synthetic latents


def tiny_model(classes: int = 4):
    family = vfm_models.get_family("dit")
    return family.create("tiny", in_channels=SHAPE[0], patch=(1, 2, 2), num_classes=classes, hidden=16, num_heads=2)


def tiny_config(out_dir: Path, **sections) -> dict:
    """A config dict for the tiny run; ``sections`` update whole sections, e.g. optim={...}."""
    cfg = {
        "model": {"family": "dit", "preset": "tiny"},
        "data": {"source": "synthetic", "micro_batch": 2, "latent_shape": list(SHAPE), "num_samples": 16, "num_classes": 4},
        "optim": {"lr": 3e-3, "warmup_steps": 2, "grad_clip": 1.0, "weight_decay": 0.01},
        "train": {"steps": 6, "seed": 7, "out_dir": str(out_dir)},
        "ema": {"enabled": True, "decay": 0.9},
        "checkpoint": {"interval": 0, "keep": 2, "export": False},
        "logging": {"tensorboard": False, "loss_curve": False, "peak_tflops": 1.0},
    }
    for name, values in sections.items():
        cfg.setdefault(name, {}).update(values)
    return cfg


def checkpoint_ema(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    """The EMA tensors (``ema.<name>``) of the run's checkpoint of ``step``, read from its files."""
    from safetensors.torch import load_file

    files = sorted((run_dir / "checkpoints" / f"step_{step:08d}" / "tensors").glob("*.safetensors"))
    return {k: v for f in files for k, v in load_file(f).items() if k.startswith("ema.")}


def build_parts(ctx) -> TrainParts:
    d = ctx.config.data
    latents, labels = make_blobs(d.num_samples, tuple(d.latent_shape), d.num_classes)
    loader = SyntheticLoader(latents, labels, d.micro_batch, ctx.coords.dp_rank, ctx.coords.dp_size)
    c, t, h, w = d.latent_shape
    return TrainParts(
        model=tiny_model(d.num_classes),
        formulation=vfm_models.get_formulation("edm")(),
        loader=loader,
        flops_per_token=1000.0,
        count_tokens=lambda batch: batch["x0"].shape[0] * t * (h // 2) * (w // 2),
        seq_len=t * (h // 2) * (w // 2),
    )


class EachBatch:
    """A run's loader with ``change(n, batch)`` applied to each batch before it is yielded (``n``
    1-based, in the order drawn): a test's fault at a chosen step (a NaN batch, a signal, a full
    disk). Its position is the wrapped loader's."""

    def __init__(self, loader, change) -> None:
        self.loader, self.change = loader, change

    def __iter__(self):
        for n, batch in enumerate(self.loader, start=1):
            yield self.change(n, batch)

    def state_dict(self):
        return self.loader.state_dict()

    def load_state_dict(self, state):
        self.loader.load_state_dict(state)


def run_config(data: dict, **kwargs):
    from vfm_parallel.trainer import train

    world = int(os.environ.get("WORLD_SIZE", "1"))
    return train(from_dict(data, world), build_parts, **kwargs)
