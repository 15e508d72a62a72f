"""A tiny denoiser, formulation and run builder shared by the trainer and checkpoint tests.

The model follows the family contract's shape (blocks in an ``nn.ModuleList``, Megatron-style
column/row linear pairs) so torch's FSDP2 and TP can be applied to it; it is small enough that
a step takes milliseconds on one CPU thread.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from vfm_parallel.trainer.synthetic import SyntheticLoader, make_blobs
from vfm_parallel.trainer import TrainParts, from_dict
from vfm_parallel.trainer.distributed import Parallelized

SHAPE = (3, 2, 4, 4)  # (C, T, H, W) of the synthetic latents


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * dim)  # colwise under TP
        self.fc2 = nn.Linear(2 * dim, dim)  # rowwise under TP

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.fc2(torch.nn.functional.gelu(self.fc1(h)))


class TinyDenoiser(nn.Module):
    """(B, C, T, H, W) noisy latents, (B,) noise level, {"y": (B,)} -> (B, C, T, H, W)."""

    def __init__(self, channels: int = SHAPE[0], dim: int = 16, depth: int = 2, classes: int = 4) -> None:
        super().__init__()
        self.embed = nn.Linear(channels, dim)
        self.t_embed = nn.Linear(1, dim)
        self.y_embed = nn.Embedding(classes, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.head = nn.Linear(dim, channels)

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: dict) -> torch.Tensor:
        b, c, *grid = x.shape
        h = self.embed(x.flatten(2).transpose(1, 2))  # (B, S, D)
        h = h + (self.t_embed(t.view(-1, 1)) + self.y_embed(cond["y"])).unsqueeze(1)
        for block in self.blocks:
            h = block(h)
        return self.head(h).transpose(1, 2).reshape(b, c, *grid)


class TinyFormulation:
    """x0-prediction with log-normal noise levels: enough structure to test the loop, not a paper."""

    def loss(self, model, x0, cond, generator, noise_generator=None):
        noise_generator = noise_generator or generator
        sigma = torch.exp(torch.randn(x0.shape[0], generator=generator, device=x0.device) - 1.0)
        noise = torch.randn(x0.shape, generator=noise_generator, device=x0.device)
        s = sigma.view(-1, 1, 1, 1, 1)
        pred = model(x0 + s * noise, torch.log(sigma) / 4, cond)
        return ((pred - x0) ** 2).mean()


def tiny_config(out_dir: Path, **sections) -> dict:
    """A config dict for the tiny run; ``sections`` update whole sections, e.g. optim={...}."""
    cfg = {
        "model": {"family": "tiny"},
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


def build_parts(ctx) -> TrainParts:
    d = ctx.config.data
    latents, labels = make_blobs(d.num_samples, tuple(d.latent_shape), d.num_classes)
    loader = SyntheticLoader(latents, labels, d.micro_batch, ctx.coords.dp_rank, ctx.coords.dp_size)
    c, t, h, w = d.latent_shape
    return TrainParts(
        model=TinyDenoiser(classes=d.num_classes),
        formulation=TinyFormulation(),
        loader=loader,
        flops_per_token=1000.0,
        count_tokens=lambda batch: batch["x0"].shape[0] * t * h * w,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_worker(rank: int, world: int, port: int) -> None:
    """Environment of a torchrun rank, then the gloo process group."""
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", rank=rank, world_size=world)


def run_config(data: dict, **kwargs):
    from vfm_parallel.trainer import train

    world = int(os.environ.get("WORLD_SIZE", "1"))
    return train(from_dict(data, world), build_parts, **kwargs)
